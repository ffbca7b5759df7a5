import { randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { ProjectControlId, type ProjectControlRecord, type ProjectSummary } from '@baton/contracts';
import { isUnknownProject, projectSummaryOf } from '@baton/domain';
import { StreamNotFound, type LedgerClient, type StoredEvent } from '@baton/eventstore';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import type { z } from 'zod';
import { Role, type Principal } from '../auth/roles';
import { assertVisible, roleForbidden } from '../auth/scope';
import { LEDGER_CLIENT } from '../projection/tokens';
import { ledgerRefusal, notFound } from './http';
import type { PauseBodySchema, ResumeBodySchema } from './schemas';

/**
 * A project's definition and kill switch through the operator API: `GET /v1/projects/{project}`
 * reads both aggregates from the events stream (no projection holds them); `pause` / `resume` are
 * relayed to the ledger on `<prefix>.cmd.ledger.<project>.op.notifier.pause|resume`, as the token's
 * operator with its role — the ledger takes them from admins only, and so does this (403
 * `role_forbidden`, `details.required_role: admin`, before anything is sent). A project the token may not see is 404, as one that
 * does not exist.
 */
@Injectable()
export class ProjectControls {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(LEDGER_CLIENT) private readonly ledger: LedgerClient,
  ) {}

  /** The project as Baton holds it; 404 when it has neither a definition nor a pause, or the caller may not see it. */
  async summary(caller: Principal, project: string): Promise<ProjectSummary> {
    assertVisible(caller, project, 'project', project);
    const [definitions, control] = await Promise.all([this.events(project, 'definition', 'current'), this.events(project, 'project', ProjectControlId)]);
    const summary = projectSummaryOf(project, definitions, control);
    if (isUnknownProject(summary)) throw notFound('project', project);
    return summary;
  }

  /**
   * Pause or resume the project as the caller (an admin). The ledger decides: its refusals keep
   * their code — 404 `project_unknown` (no definition, not forced), 409 `project_already_paused` /
   * `project_not_paused` / `idempotency_key_reused`, 400 for a body it refuses, 503 when no ledger answers.
   */
  async control(
    caller: Principal,
    project: string,
    name: 'pause' | 'resume',
    /** The body, parsed once the caller may send it (a non-admin is told that, not the schema). */
    parse: () => z.infer<typeof PauseBodySchema> | z.infer<typeof ResumeBodySchema>,
  ): Promise<{ project: ProjectControlRecord; events: number }> {
    assertVisible(caller, project, 'project', project);
    if (caller.role !== Role.admin) {
      throw roleForbidden(
        caller,
        Role.admin,
        `${caller.role === 'operator' ? 'an' : 'a'} ${caller.role} token may not ${name} a project; the kill switch needs the admin role`,
      );
    }
    const body = parse();
    const command = { ...body, idempotency_key: body.idempotency_key ?? `${name}-${randomUUID()}` };
    const options = { operator: { name: caller.name, role: caller.role } };
    const reply =
      name === 'pause'
        ? await this.ledger.pause(project, command as z.infer<typeof PauseBodySchema> & { idempotency_key: string }, options)
        : await this.ledger.resume(project, command, options);
    if (reply.ok) return { project: reply.project, events: reply.events };
    throw ledgerRefusal(reply.error, command.idempotency_key, { project });
  }

  /** One aggregate's events; none when the events stream does not exist yet. */
  private async events(project: string, kind: 'definition' | 'project', id: string): Promise<StoredEvent[]> {
    try {
      return (await this.runtime.store.read({ project, kind, id })).events;
    } catch (error) {
      if (error instanceof StreamNotFound) return [];
      throw error;
    }
  }
}
