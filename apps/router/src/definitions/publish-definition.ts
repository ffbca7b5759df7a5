import { Inject, Injectable } from '@nestjs/common';
import {
  ActorNameSchema,
  ADMIN_ACTOR,
  decodeInbound,
  leadingCode,
  ProjectDefinitionSchema,
  PUBLISHED_BY_HEADER,
  RejectionCode,
  type Rejection,
} from '@baton/contracts';
import { DlqSources, hopTrace } from '@baton/eventstore';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import type { PublishDefinitionReply, RouterReplyError } from '@baton/contracts';
import { deadLetterRequest } from '../shared/dead-letter';
import { nowIso } from '../shared/ids';
import { subjectTokens } from '../shared/subjects';
import { DefinitionCatalog, definitionRef } from './definition-catalog';
import { definitionDecider } from './definition.decider';
import { definitionDigest } from './digest';

const encoder = new TextEncoder();

/** Where refused definition requests are dead-lettered (`<prefix>.dlq.router-definitions`). */
export const DEFINITIONS_DLQ_SOURCE = DlqSources.routerDefinitions;

/**
 * Use case: publish a project definition (`<prefix>.cmd.router.<project>.publish_definition`).
 *
 * Validates the body (size cap, JSON, `ProjectDefinitionSchema`, the subject's project equal to
 * the body's), then appends `definition.published` to `{project, definition, current}` unless the
 * same definition (same digest) is already current. Replies `{ ok: true, version, digest,
 * changed }` (`version` = the stream sequence of the definition in force) or `{ ok: false, error }`.
 * Every refusal is also dead-lettered with the original bytes. Retrying is safe: a repeat of the
 * current definition appends nothing and answers the same version.
 */
@Injectable()
export class PublishDefinitionUseCase {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    private readonly catalog: DefinitionCatalog,
  ) {}

  async execute(subject: string, body: unknown, headers: Record<string, string[]>): Promise<PublishDefinitionReply> {
    const text = body === undefined ? '' : JSON.stringify(body);
    const refuse = (error: RouterReplyError) => this.refuse(subject, text, headers, error);

    const decoded = decodeInbound(text, ProjectDefinitionSchema);
    if (!decoded.ok) return refuse(fromRejection(decoded.rejection));
    const definition = decoded.value;
    const tokens = subjectTokens(this.runtime.config.BATON_PREFIX, subject);
    if (tokens === null || tokens.project !== definition.project) {
      return refuse({
        code: RejectionCode.projectMismatch,
        kind: 'rejection',
        message: `the subject names project '${tokens?.project ?? '?'}' but the definition is for '${definition.project}'`,
        issues: [{ path: 'project', message: 'does not match the subject' }],
      });
    }

    // Only the admin connection may send this subject: it is the publisher (`admin`), never the
    // router. The person it names (the CLI's BATON_OPERATOR) is a claim, recorded beside it as
    // `on_behalf_of`, as the admin's pause and resume are.
    const named = headers[PUBLISHED_BY_HEADER];
    if (named !== undefined && (named.length !== 1 || !ActorNameSchema.safeParse(named[0]).success)) {
      return refuse({
        code: RejectionCode.schemaViolation,
        kind: 'rejection',
        message: `the ${PUBLISHED_BY_HEADER} header names the person publishing, once: an actor name (letters, digits and _ - . : @, at most 128)`,
        issues: [{ path: PUBLISHED_BY_HEADER, message: 'not one actor name' }],
      });
    }
    const onBehalfOf = named?.[0] !== undefined && named[0] !== ADMIN_ACTOR ? named[0] : undefined;
    const publishedBy = ADMIN_ACTOR;
    const digest = definitionDigest(definition);
    const now = nowIso();
    const result = await this.runtime.store.handleCommand(
      definitionRef(definition.project),
      definitionDecider,
      {
        type: 'publish',
        data: { definition, digest, published_by: publishedBy, ...(onBehalfOf !== undefined ? { on_behalf_of: onBehalfOf } : {}) },
        metadata: { now },
      },
      // Event ids are random on purpose: publishing A, B, then A again must append A again.
      {
        occurredAt: now,
        actor: publishedBy,
        origin: 'operator',
        causationId: null,
        correlationId: `definition-${definition.project}`,
        trace: hopTrace(headers),
      },
    );
    if (!result.ok) {
      const { details } = result.error;
      return refuse({
        code: result.error.code,
        kind: result.error.kind,
        message: result.error.message,
        issues: [],
        ...(details !== undefined ? { details } : {}),
      });
    }
    this.catalog.invalidate(definition.project);
    const changed = result.events.length > 0;
    const version = changed ? result.events[0]!.seq : result.lastSeq;
    this.runtime.logger.info(changed ? 'definition published' : 'definition unchanged', { project: definition.project, version, digest });
    return { ok: true, project: definition.project, version, digest, changed };
  }

  private async refuse(subject: string, text: string, headers: Record<string, string[]>, error: RouterReplyError): Promise<PublishDefinitionReply> {
    await deadLetterRequest(this.runtime.nats, this.runtime.logger, {
      prefix: this.runtime.config.BATON_PREFIX,
      source: DEFINITIONS_DLQ_SOURCE,
      consumer: this.runtime.instance,
      reason: error.code,
      detail: error.message,
      subject,
      headers,
      data: encoder.encode(text),
    });
    return { ok: false, error };
  }
}

/** The reply for a refused definition: a check with a stable code of its own (MESH_SELF_HANDOFF…) gives the error its code. */
function fromRejection(rejection: Rejection): RouterReplyError {
  return { code: leadingCode(rejection), kind: 'rejection', message: rejection.message, issues: rejection.issues };
}
