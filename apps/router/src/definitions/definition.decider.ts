import type { DefinitionEvent, ProjectDefinition, WorkflowDefinition } from '@baton/contracts';
import { accept, assertNever, DomainErrorKind, reject, type Decider, type DecisionResult } from '@baton/domain';
import { canonicalJson } from '@baton/projections';

/**
 * The definition aggregate (`{project, kind: 'definition', id: 'current'}`): every publish of a
 * project definition is one `definition.published` event, and its stream sequence is the
 * definition's version. The router is the aggregate's only writer.
 */

/** One published definition, as folded. */
export interface PublishedDefinition {
  definition: ProjectDefinition;
  digest: string;
}

/** Every definition the project published, oldest first (runs pin the workflow they started on). */
export interface DefinitionState {
  published: readonly PublishedDefinition[];
}

export interface PublishDefinition {
  type: 'publish';
  /** `published_by`: who sent it (the admin connection); `on_behalf_of`: the person it named, a claim. */
  data: { definition: ProjectDefinition; digest: string; published_by: string; on_behalf_of?: string };
  metadata: { now: string };
}

export const DefinitionErrorCode = {
  /** A workflow name@version that was already published with other content. */
  workflowVersionChanged: 'workflow_version_changed',
  wrongProject: 'wrong_project',
} as const;

export function initialDefinitionState(): DefinitionState {
  return { published: [] };
}

export function evolveDefinition(state: DefinitionState, event: DefinitionEvent): DefinitionState {
  switch (event.type) {
    case 'definition.published':
      return { published: [...state.published, { definition: event.data.definition, digest: event.data.digest }] };
    default:
      return assertNever(event.type, 'definition event');
  }
}

/**
 * Publish a definition. Idempotent: the digest of the current definition yields no event (so a
 * re-publish does not bump the version). A workflow version is immutable once published: a
 * definition that changes the steps of an already published `name@version` is refused
 * (`workflow_version_changed`) — bump the version instead — because running workflow runs are
 * pinned to the version they started on.
 */
export function decideDefinition(command: PublishDefinition, state: DefinitionState): DecisionResult<DefinitionEvent> {
  const { definition, digest, published_by, on_behalf_of } = command.data;
  const current = state.published[state.published.length - 1];
  if (current !== undefined && current.definition.project !== definition.project) {
    return reject(DomainErrorKind.invalid, DefinitionErrorCode.wrongProject, `this aggregate holds project '${current.definition.project}'`);
  }
  if (current?.digest === digest) return accept();
  for (const workflow of definition.workflows) {
    const earlier = findPublishedWorkflow(state, workflow.name, workflow.version);
    if (earlier !== undefined && canonicalJson(earlier.workflow) !== canonicalJson(workflow)) {
      return reject(
        DomainErrorKind.invalid,
        DefinitionErrorCode.workflowVersionChanged,
        `workflow '${workflow.name}' v${workflow.version} was already published with other steps; publish it as a new version`,
        { workflow: workflow.name, version: workflow.version },
      );
    }
  }
  return accept({
    type: 'definition.published',
    data: { definition, published_by, ...(on_behalf_of !== undefined ? { on_behalf_of } : {}), published_at: command.metadata.now, digest },
  });
}

export const definitionDecider: Decider<PublishDefinition, DefinitionEvent, DefinitionState> = {
  decide: decideDefinition,
  evolve: evolveDefinition,
  initialState: initialDefinitionState,
};

/** A workflow version and the agents of the definition it was found in. */
export interface PinnedWorkflow {
  workflow: WorkflowDefinition;
  agents: ProjectDefinition['agents'];
  definition: ProjectDefinition;
}

/**
 * Find `name@version` in the published history, newest definition first, so a run keeps the
 * workflow version it started with even after later publishes dropped it. The agents come from
 * the same definition (the newest one that still holds that workflow version).
 */
export function findPublishedWorkflow(state: DefinitionState, name: string, version: number): PinnedWorkflow | undefined {
  for (let i = state.published.length - 1; i >= 0; i--) {
    const definition = state.published[i]!.definition;
    const workflow = definition.workflows.find((w) => w.name === name && w.version === version);
    if (workflow !== undefined) return { workflow, agents: definition.agents, definition };
  }
  return undefined;
}

/**
 * The workflow a new run starts on: `name@version` when a version is asked for (searched through
 * the history like {@link findPublishedWorkflow}), else the highest version of `name` in the
 * current definition.
 */
export function workflowForStart(state: DefinitionState, name: string, version?: number): PinnedWorkflow | undefined {
  if (version !== undefined) return findPublishedWorkflow(state, name, version);
  const current = state.published[state.published.length - 1]?.definition;
  if (current === undefined) return undefined;
  const workflow = current.workflows
    .filter((w) => w.name === name)
    .reduce<WorkflowDefinition | undefined>((best, w) => (best === undefined || w.version > best.version ? w : best), undefined);
  return workflow === undefined ? undefined : { workflow, agents: current.agents, definition: current };
}

/**
 * The workflow a run is pinned to. A run started with a definition digest keeps that exact
 * published definition — its agents, routes and return handlers — even after later publishes
 * (seed 001 routes never change mid-run); older runs fall back to {@link findPublishedWorkflow}.
 */
export function pinnedForRun(
  state: DefinitionState,
  run: { workflow: { name: string; version: number }; definitionDigest: string | null },
): PinnedWorkflow | undefined {
  if (run.definitionDigest !== null) {
    for (let i = state.published.length - 1; i >= 0; i--) {
      const entry = state.published[i]!;
      if (entry.digest !== run.definitionDigest) continue;
      const workflow = entry.definition.workflows.find((w) => w.name === run.workflow.name && w.version === run.workflow.version);
      if (workflow !== undefined) return { workflow, agents: entry.definition.agents, definition: entry.definition };
    }
  }
  return findPublishedWorkflow(state, run.workflow.name, run.workflow.version);
}

/** The digest of the published definition a pinned workflow came from. */
export function digestOf(state: DefinitionState, pinned: PinnedWorkflow): string | undefined {
  for (let i = state.published.length - 1; i >= 0; i--) {
    if (state.published[i]!.definition === pinned.definition) return state.published[i]!.digest;
  }
  return undefined;
}
