import {
  ProjectDefinitionSchema,
  type AgentDefinition,
  type AgentResult,
  type EventEnvelope,
  type EventRegistry,
  type HandoffEvent,
  type Origin,
  type WorkflowDefinition,
} from '@baton/contracts';
import {
  handoffDecider,
  handoffIdFor,
  reactToHandoffEvent,
  runDecider,
  type HandoffCommand,
  type HandoffState,
  type RunCommand,
  type RunEvent,
  type RunState,
} from '@baton/domain';
import type { SequencedEvent } from '../store';

/**
 * An example history of one project for tests, demos and the bench: runs that stop (policy with a
 * frozen refund, budget, unknown intent), a run on hold, handoffs returned with an open and a
 * decided handback, and one escalated at its retry cap. Every event comes from the real deciders:
 * the steps are commands, decided one after the other against the folded state.
 */
export const ScenarioProject = ProjectDefinitionSchema.parse({
  project: 'demo',
  lead: 'lena',
  agents: [
    { name: 'issue', role: 'Triage' },
    { name: 'architect', role: 'Architect' },
    { name: 'reviewer', role: 'Reviewer' },
    { name: 'shipper', role: 'Release' },
  ],
  workflows: [
    {
      name: 'feature',
      version: 1,
      entry: 'triage',
      steps: [
        { id: 'triage', agent: 'issue', next: 'plan' },
        { id: 'plan', agent: 'architect', next: 'review' },
        { id: 'review', agent: 'reviewer', next: 'ship', human_gate: true },
        { id: 'ship', agent: 'shipper', terminal: true },
      ],
    },
  ],
});
const workflow: WorkflowDefinition = ScenarioProject.workflows[0] as WorkflowDefinition;
const agents: readonly AgentDefinition[] = ScenarioProject.agents;
const PROJECT = 'demo';

/** Options of {@link scenarioSteps}. */
export interface ScenarioOptions {
  /** The project the history belongs to (default `demo`): two projects may hold the same ids. */
  project?: string;
}

/** One command of the scenario, for one aggregate. */
export type ScenarioStep =
  | { aggregate: 'run'; id: string; command: RunCommand; actor: string; origin: Origin }
  | { aggregate: 'handoff'; id: string; command: HandoffCommand; actor: string; origin: Origin };

const at = (minute: number) => new Date(Date.UTC(2026, 0, 1, 9, minute)).toISOString();

function start(id: string, minute: number, project: string): ScenarioStep {
  return {
    aggregate: 'run',
    id,
    actor: 'router',
    origin: 'agent',
    command: {
      type: 'start_run',
      data: { workflow_run_id: id, project, workflow, people: { started_by: 'sam', issue_author: null, trigger_author: null } },
      metadata: { now: at(minute), actor: 'router' },
    },
  };
}

/**
 * The entry agent's result on a run, sent under its claim on the run's entry handoff (the claim
 * rule: the command carries the handoff as the router read it, claimed by `issue`).
 */
function result(wrid: string, resultId: string, minute: number, extra: Partial<AgentResult>, project: string): ScenarioStep {
  const handoffId = handoffIdFor(wrid, { kind: 'start', id: wrid });
  const claim = { claim_id: `c-${handoffId}`, claimed_by: 'issue' };
  const res: AgentResult = {
    result_id: resultId,
    run_id: `ar-${resultId}`,
    project,
    workflow_run_id: wrid,
    agent: 'issue',
    produced_at: at(minute),
    handoff_id: handoffId,
    claim_id: claim.claim_id,
    ...extra,
  };
  return {
    aggregate: 'run',
    id: wrid,
    actor: 'router',
    origin: 'agent',
    command: {
      type: 'record_result',
      data: { result: res, workflow, agents, handoff: { handoff_id: handoffId, status: 'claimed', claim } },
      metadata: { now: at(minute), actor: 'router' },
    },
  };
}

function ho(id: string, minute: number, actor: string, actorKind: 'agent' | 'operator' | 'watchdog', command: Omit<HandoffCommand, 'metadata'>): ScenarioStep {
  return {
    aggregate: 'handoff',
    id,
    actor,
    origin: actorKind === 'watchdog' ? 'watchdog' : actorKind === 'operator' ? 'operator' : 'agent',
    command: { ...command, metadata: { now: at(minute), actor, actorKind } } as HandoffCommand,
  };
}

const report = {
  summary: 'parser written',
  files_changed: ['src/parser.ts'],
  verification: 'npm test: 42 passed',
  next_steps: '',
  outcome: 'completed' as const,
  evidence: { tests_run: ['parser.spec.ts'] },
};
const roster = { visible_actors: ['alice', 'bob', 'carol', 'lena'], project_lead: 'lena' };

function createHandoff(id: string, minute: number, priority: 'low' | 'medium' | 'high' | 'urgent', maxRetries: number, project: string): ScenarioStep {
  return ho(id, minute, 'alice', 'agent', {
    type: 'create',
    data: {
      handoff_id: id,
      project,
      kind: 'task',
      priority,
      from_agent: 'alice',
      to_agent: 'bob',
      summary: `work item ${id}`,
      context: {},
      acceptance: { tests: 'green' },
      max_retries: maxRetries,
      workflow_run_id: 'wr-a',
      idempotency_key: `create:${id}`,
    },
  });
}

const claim = (id: string, minute: number): ScenarioStep =>
  ho(id, minute, 'bob', 'agent', {
    type: 'claim',
    data: { handoff_id: id, claim_id: `c-${id}`, lease_ms: 60_000, claimer_roles: [], idempotency_key: `claim:${id}` },
  });
const ret = (id: string, minute: number): ScenarioStep =>
  ho(id, minute, 'bob', 'agent', {
    type: 'return',
    data: { handoff_id: id, claim_id: `c-${id}`, report, handback_id: `hb-${id}`, roster, idempotency_key: `return:${id}` },
  });

/**
 * The scenario's commands in order (in project `demo` unless `options.project` says otherwise).
 * The ledger's reactions (handbacks, consults) are added by {@link foldScenario}.
 */
export function scenarioSteps(options: ScenarioOptions = {}): ScenarioStep[] {
  const project = options.project ?? PROJECT;
  return [
    start('wr-a', 0, project),
    result(
      'wr-a',
      'res-a1',
      1,
      {
        body: 'The refund is over my cap; a person has to approve it.',
        stop: { why: 'policy', detail: 'refund over the cap' },
        tried: [
          { name: 'router', trace_id: 'tr-1' },
          { name: 'search', trace_id: 'tr-2' },
        ],
        pending_tool_call: { name: 'refund', args: { amount: 40, order: 99 } },
      },
      project,
    ),
    start('wr-b', 2, project),
    result('wr-b', 'res-b1', 3, { decision: { dispatch: { status: 'hold', reason: 'needs a product decision' } } }, project),
    start('wr-c', 4, project),
    result('wr-c', 'res-c1', 5, { stop: { why: 'budget' }, tried: [{ name: 'search' }, { name: 'search' }] }, project),
    {
      aggregate: 'run',
      id: 'wr-c',
      actor: 'olga',
      origin: 'operator',
      command: {
        type: 'resume',
        data: {
          answer: {
            kind: 'stop_answer',
            answer: { packet_id: 'stop-r-wr-c:res-c1', answer_id: 'ans-c1', action: 'deny', answered_by: 'olga', answered_at: at(6) },
          },
          workflow,
          agents,
        },
        metadata: { now: at(6), actor: 'olga', actorRole: 'operator' },
      },
    },
    start('wr-d', 7, project),
    result('wr-d', 'res-d1', 8, { stop: { why: 'unknown_intent' }, tried: [] }, project),
    createHandoff('h-1', 10, 'high', 3, project),
    claim('h-1', 11),
    ret('h-1', 12),
    createHandoff('h-2', 13, 'urgent', 3, project),
    claim('h-2', 14),
    ret('h-2', 15),
    ho('hb-h-2', 16, 'alice', 'agent', { type: 'decide_handback', data: { handoff_id: 'hb-h-2', decision: 'accept', idempotency_key: 'decide:hb-h-2' } }),
    createHandoff('h-3', 17, 'low', 0, project),
    claim('h-3', 18),
    ho('h-3', 20, 'baton-watchdog', 'watchdog', {
      type: 'requeue_expired',
      data: { handoff_id: 'h-3', claim_id: 'c-h-3', project_lead: 'lena', escalation_handoff_id: 'esc-h-3', idempotency_key: 'requeue:c-h-3' },
    }),
  ];
}

/** An event the scenario produced, with the envelope fields a store would add. */
export interface ScenarioEvent {
  aggregate: 'run' | 'handoff';
  id: string;
  event: RunEvent | HandoffEvent;
  actor: string;
  origin: Origin;
  occurredAt: string;
}

/**
 * Decide the scenario's commands in order (and the ledger's reactions to handoff events, as the
 * ledger would), returning every event. Throws if a command is refused: the scenario is valid.
 */
export function foldScenario(steps: ScenarioStep[] = scenarioSteps()): ScenarioEvent[] {
  const runs = new Map<string, RunState>();
  const handoffs = new Map<string, HandoffState>();
  const out: ScenarioEvent[] = [];
  const queue = [...steps];
  while (queue.length > 0) {
    const step = queue.shift() as ScenarioStep;
    const occurredAt = step.command.metadata.now;
    if (step.aggregate === 'run') {
      const state = runs.get(step.id) ?? runDecider.initialState();
      const decision = runDecider.decide(step.command, state);
      if (!decision.ok) throw new Error(`scenario step ${step.command.type} on ${step.id} refused: ${decision.error.code}`);
      runs.set(step.id, decision.events.reduce(runDecider.evolve, state));
      for (const event of decision.events)
        out.push({ aggregate: 'run', id: step.id, event, actor: event.by?.actor ?? step.actor, origin: event.by?.origin ?? step.origin, occurredAt });
      continue;
    }
    let state = handoffs.get(step.id) ?? handoffDecider.initialState();
    const decision = handoffDecider.decide(step.command, state);
    if (!decision.ok) throw new Error(`scenario step ${step.command.type} on ${step.id} refused: ${decision.error.code}`);
    const reactions: ScenarioStep[] = [];
    for (const event of decision.events) {
      state = handoffDecider.evolve(state, event);
      out.push({ aggregate: 'handoff', id: step.id, event, actor: step.actor, origin: step.origin, occurredAt });
      for (const reaction of reactToHandoffEvent(event, { state, deriveId: (...parts) => parts.join('-'), projectLead: 'lena' })) {
        reactions.push({ aggregate: 'handoff', id: reaction.aggregateId, command: reaction.command, actor: reaction.command.metadata.actor, origin: 'agent' });
      }
    }
    handoffs.set(step.id, state);
    queue.unshift(...reactions);
  }
  return out;
}

/** A scenario event in an envelope: the fields every envelope of it shares. */
function envelopeOf(e: ScenarioEvent, id: string, version: number, project: string, payload: unknown): EventEnvelope {
  return {
    id,
    type: e.event.type,
    version,
    aggregate: { kind: e.aggregate, id: e.id },
    project,
    occurredAt: e.occurredAt,
    actor: e.actor,
    origin: e.origin,
    causationId: null,
    correlationId: e.id,
    payload,
  };
}

/** One scenario event as the projections receive it: stored at `seq` in `project`, its id `ev-<seq>`. */
export function scenarioSequenced(e: ScenarioEvent, seq: number, project = 'demo'): SequencedEvent {
  return { seq, ...envelopeOf(e, `ev-${seq}`, 1, project, e.event.data) };
}

/** The scenario's events (default: {@link foldScenario}) as a stream from sequence 1, in `project`. */
export function scenarioLog(events: ScenarioEvent[] = foldScenario(), project = 'demo'): SequencedEvent[] {
  return events.map((e, index) => scenarioSequenced(e, index + 1, project));
}

/**
 * A scenario event as the event store stores it: in an envelope of `project` with id `id`, at its
 * type's current version, the payload as the registry's validation returns it (defaults filled,
 * unknown keys dropped). Throws when the payload does not validate: the scenario is valid.
 */
export function scenarioEnvelope(registry: EventRegistry, e: ScenarioEvent, id: string, project: string): EventEnvelope {
  const checked = registry.validatePayload(e.event.type, e.event.data);
  if (!checked.ok) throw new Error(`the scenario's ${e.event.type} does not validate: ${checked.rejection.message}`);
  return envelopeOf(e, id, registry.currentVersion(e.event.type), project, checked.value);
}
