import { Inject, Injectable } from '@nestjs/common';
import { ActorNameSchema, OperatorRoleSchema, type HandoffActorKind, type ProjectDefinition } from '@baton/contracts';
import type { ProjectRoster } from '@baton/domain';
import { LruCache } from '@baton/eventstore';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { LEDGER_CONFIG, type LedgerConfig } from '../config';

/** What the ledger knows about a project when it fills a command. */
export interface ProjectView {
  /** Visible actors (the definition's agents) and the default lead; empty / no lead without a definition. */
  roster: ProjectRoster;
  /**
   * Roles a claimer holds (for `to_role` handoffs): its agent role, and `operator` for operators and
   * humans. An agent's role that names a role people hold (`viewer`, `operator`, `admin`: the
   * operator API's roles) is not given to the agent: a definition cannot make an agent one of "the
   * operators" a handback with no eligible reviewer goes to.
   */
  rolesOf(actor: string, actorKind: HandoffActorKind): string[];
  /** Does this project take cross-project handoffs from `source` (`accepts_handoffs_from`: the project, or `*`)? */
  acceptsHandoffsFrom(source: string): boolean;
}

interface Cached {
  definition: ProjectDefinition | null;
  lastSeq: number;
  fetchedAt: number;
}

const EMPTY: Cached = { definition: null, lastSeq: 0, fetchedAt: 0 };

/** The view of a project with no (or some) definition. */
export function projectView(definition: ProjectDefinition | null): ProjectView {
  const agents = definition?.agents ?? [];
  const lead = definition?.lead;
  const roster: ProjectRoster = {
    visible_actors: agents.map((agent) => agent.name),
    ...(lead !== undefined && ActorNameSchema.safeParse(lead).success ? { project_lead: lead } : {}),
  };
  const roles = new Map(agents.map((agent) => [agent.name, agent.role]));
  const accepts = new Set(definition?.accepts_handoffs_from ?? []);
  return {
    roster,
    acceptsHandoffsFrom: (source) => accepts.has('*') || accepts.has(source),
    rolesOf(actor, actorKind) {
      const out: string[] = [];
      if (actorKind === 'operator' || actorKind === 'human') out.push('operator');
      const role = roles.get(actor)?.trim();
      if (role && !OperatorRoleSchema.safeParse(role).success) out.push(role);
      return out;
    },
  };
}

/** Does `definition` have `workflow` (at `version`, when one is given)? */
function namesWorkflow(definition: ProjectDefinition | null, workflow: string, version: number | undefined): boolean {
  return definition !== null && definition.workflows.some((w) => w.name === workflow && (version === undefined || w.version === version));
}

/** Most projects whose definition the ledger keeps read (least recently used evicted). */
export const PROJECTS_KEPT = 4096;

/**
 * Reads each project's definition (aggregate `definition` / `current`, event
 * `definition.published`, written by the router) through the event store and keeps it for
 * `LEDGER_DEFINITION_TTL_MS`; after that only events newer than the cached one are read. A project
 * with no definition has an empty roster and no lead. Concurrent look-ups of one project share
 * one read. Store errors propagate (the caller answers `unavailable`).
 */
@Injectable()
export class ProjectDirectory {
  /**
   * Bounded: any agent may name a project (a `create`'s target) and each look-up caches it before
   * anything refuses it; a project evicted is read again (from its last event) when next asked.
   */
  private readonly cache = new LruCache<string, Cached>(PROJECTS_KEPT);
  private readonly loading = new Map<string, Promise<Cached>>();

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(LEDGER_CONFIG) private readonly config: LedgerConfig,
  ) {}

  async view(project: string): Promise<ProjectView> {
    return projectView((await this.definition(project)).definition);
  }

  /**
   * Has `project` a published definition, as of now (not the kept copy's age): what the kill
   * switch asks before it pauses a project, so a definition published a moment ago counts.
   */
  async isDefined(project: string): Promise<boolean> {
    const next = await this.refresh(project, this.cache.get(project) ?? EMPTY);
    return next.definition !== null;
  }

  /**
   * Can a run start naming `workflow` (and `version`, when it pins one) find it in `project`? What
   * the agent edge asks before it relays a start: `defined` when the kept copy (of any age) names it,
   * else as of a fresh read — so a definition published a moment ago counts —; `undefined` (with
   * why, in the router's words) when the project has no definition, or its current one lacks the
   * workflow and the start pins no version (the router starts the current definition's); `unsure`
   * when a pinned version is not in the current definition (an earlier one may hold it: the router,
   * which keeps every version, decides). Store errors propagate.
   */
  async startable(project: string, workflow: string, version?: number): Promise<{ verdict: 'defined' | 'unsure' } | { verdict: 'undefined'; detail: string }> {
    if (this.keptNames(project, workflow, version)) return { verdict: 'defined' };
    const fresh = await this.refresh(project, this.cache.get(project) ?? EMPTY);
    if (namesWorkflow(fresh.definition, workflow, version)) return { verdict: 'defined' };
    if (fresh.definition === null) return { verdict: 'undefined', detail: `project '${project}' has no published definition` };
    if (version !== undefined) return { verdict: 'unsure' };
    return { verdict: 'undefined', detail: `workflow '${workflow}' is not defined in project '${project}'` };
  }

  /** The kept copy's verdict alone, without reading: true when it names the workflow (see {@link startable}). */
  keptNames(project: string, workflow: string, version?: number): boolean {
    return namesWorkflow(this.cache.get(project)?.definition ?? null, workflow, version);
  }

  private async definition(project: string): Promise<Cached> {
    const cached = this.cache.get(project);
    if (cached && Date.now() - cached.fetchedAt < this.config.LEDGER_DEFINITION_TTL_MS) return cached;
    let pending = this.loading.get(project);
    if (!pending) {
      pending = this.refresh(project, cached ?? EMPTY).finally(() => this.loading.delete(project));
      this.loading.set(project, pending);
    }
    return pending;
  }

  private async refresh(project: string, base: Cached): Promise<Cached> {
    const read = await this.runtime.store.read({ project, kind: 'definition', id: 'current' }, { afterSeq: base.lastSeq });
    // The stream went backwards (recreated): start over.
    if (read.lastSeq < base.lastSeq) return this.refresh(project, EMPTY);
    let definition = base.definition;
    for (const event of read.events) {
      if (event.type === 'definition.published') definition = (event.payload as { definition: ProjectDefinition }).definition;
    }
    const next: Cached = { definition, lastSeq: read.lastSeq, fetchedAt: Date.now() };
    this.cache.set(project, next);
    return next;
  }
}
