import fc from 'fast-check';
import { HandoffRecordSchema, type CompletionReport, type HandoffActorKind, type HandoffEvent } from '@baton/contracts';
import { handoffClaimFold, handoffClaimView } from '../claims/result-claim';
import { fold } from '../decider';
import type { HandoffCommand } from './commands';
import { handoffDecider } from './decider';
import { hasEvidence } from './evidence';
import { reactToHandoffEvent } from './policies';
import { at, deriveId, Ledger, PROJECT } from './handoff.fixtures';
import { toHandoffRecord, type HandoffState } from './state';

/*
 * Random walks over a small world of handoffs. Each step is an abstract instruction that the
 * interpreter turns into a concrete command (often using the live claim id, so walks get deep);
 * accepted commands run through the same policies as the ledger. After every step every handoff's
 * folded record must validate, and the rules that must never break are checked on the events.
 */

const actors: Array<{ name: string; kind: HandoffActorKind }> = [
  { name: 'alice', kind: 'agent' },
  { name: 'bob', kind: 'agent' },
  { name: 'carol', kind: 'agent' },
  { name: 'lena', kind: 'agent' },
  { name: 'olga', kind: 'operator' },
  { name: 'wd', kind: 'watchdog' },
];

const ops = ['create', 'claim', 'heartbeat', 'return', 'decide', 'release', 'abandon', 'fail', 'archive', 'requeue', 'give_up', 'replay'] as const;

/** Weighted so that walks go deep: claims, returns and decisions are common. */
const opArb = fc.oneof(
  { arbitrary: fc.constantFrom(...ops), weight: 3 },
  { arbitrary: fc.constantFrom('claim', 'return', 'decide', 'requeue', 'heartbeat'), weight: 4 },
);

const stepArb = fc.record({
  op: opArb,
  target: fc.nat(7),
  actor: fc.nat(actors.length - 1),
  /** Most steps are issued by the legitimate actor with the live claim id; the rest probe refusals. */
  cooperative: fc.integer({ min: 0, max: 9 }).map((n) => n < 7),
  advance: fc.integer({ min: 0, max: 40 }),
  leaseMs: fc.constantFrom(1_000, 30_000, 60_000),
  maxRetries: fc.integer({ min: 0, max: 2 }),
  addressed: fc.constantFrom('none', 'agent', 'role'),
  outcome: fc.constantFrom('completed', 'partial', 'blocked'),
  evidence: fc.constantFrom<CompletionReport['evidence']>(
    {},
    { tests_run: [{}] },
    { artifacts: ['n/a'] },
    { tests_run: ['unit: 3 passed'] },
    { work_product_id: 'pr-7' },
  ),
  decision: fc.constantFrom('accept', 'rework'),
  visibleDelegator: fc.boolean(),
  withLead: fc.boolean(),
});
type Step = typeof stepArb extends fc.Arbitrary<infer T> ? T : never;

interface World {
  ledger: Ledger;
  now: number;
  seq: number;
  lastAccepted: HandoffCommand | null;
  /** Returns made by agents: their outcome must be backed by evidence unless floored. */
  agentReturns: Array<{ handoffId: string; eventIndex: number }>;
}

function ids(world: World): string[] {
  return [...world.ledger.streams.keys()];
}

function legitimateActor(step: Step, state: HandoffState): { name: string; kind: HandoffActorKind } | null {
  if (state.status === 'absent') return null;
  switch (step.op) {
    case 'claim':
      return state.to_agent ? { name: state.to_agent, kind: 'agent' } : { name: state.kind === 'completion_handback' ? 'olga' : 'carol', kind: 'agent' };
    case 'heartbeat':
    case 'return':
    case 'release':
    case 'fail':
      return state.status === 'claimed' ? { name: state.claim.claimed_by, kind: 'agent' } : null;
    case 'decide':
      return state.to_agent ? { name: state.to_agent, kind: 'agent' } : { name: 'olga', kind: 'operator' };
    case 'abandon':
      return { name: state.from_agent, kind: 'agent' };
    default:
      return null;
  }
}

function toCommand(step: Step, world: World): { id: string; command: HandoffCommand } | null {
  const known = ids(world);
  const targetState = known.length > 0 ? world.ledger.state(known[step.target % known.length]!) : null;
  const actor = (step.cooperative && targetState && legitimateActor(step, targetState)) || actors[step.actor]!;
  const now = at(world.now);
  const metadata = { actor: actor.name, actorKind: actor.kind, now };
  const key = `k${world.seq}`;
  if (step.op === 'create') {
    const id = `h${world.seq}`;
    return {
      id,
      command: {
        type: 'create',
        data: {
          handoff_id: id,
          project: PROJECT,
          kind: step.target % 3 === 0 ? 'consult' : 'task',
          priority: 'medium',
          from_agent: actor.kind === 'agent' ? actor.name : 'alice',
          ...(step.addressed === 'agent' ? { to_agent: actors[(step.actor + 1) % 4]!.name } : {}),
          ...(step.addressed === 'role' ? { to_role: 'dev' } : {}),
          summary: 'do the thing',
          context: {},
          acceptance: {},
          max_retries: step.maxRetries,
          idempotency_key: key,
        },
        metadata,
      },
    };
  }
  if (known.length === 0) return null;
  const id = known[step.target % known.length]!;
  const state = world.ledger.state(id);
  const live = state.status === 'claimed' || state.status === 'returned' ? state.claim.claim_id : 'c-none';
  const claimId = step.cooperative ? live : `c-stale-${step.target}`;
  switch (step.op) {
    case 'claim':
      return {
        id,
        command: {
          type: 'claim',
          data: { handoff_id: id, claim_id: `c${world.seq}`, lease_ms: step.leaseMs, claimer_roles: step.cooperative ? ['dev'] : [], idempotency_key: key },
          metadata,
        },
      };
    case 'heartbeat':
      return { id, command: { type: 'heartbeat', data: { handoff_id: id, claim_id: claimId, lease_ms: step.leaseMs, idempotency_key: key }, metadata } };
    case 'return': {
      const roster = {
        visible_actors: step.visibleDelegator ? ['alice', 'bob', 'carol', 'lena'] : ['bob'],
        ...(step.withLead ? { project_lead: 'lena' } : {}),
      };
      const report: CompletionReport = { summary: 'done', files_changed: [], verification: '', next_steps: '', outcome: step.outcome, evidence: step.evidence };
      return {
        id,
        command: { type: 'return', data: { handoff_id: id, claim_id: claimId, report, handback_id: `hb${world.seq}`, roster, idempotency_key: key }, metadata },
      };
    }
    case 'decide':
      return {
        id,
        command: {
          type: 'decide_handback',
          data:
            step.decision === 'accept'
              ? { handoff_id: id, decision: 'accept', idempotency_key: key }
              : { handoff_id: id, decision: 'rework', note: 'again', idempotency_key: key },
          metadata,
        },
      };
    case 'release':
      return { id, command: { type: 'release', data: { handoff_id: id, claim_id: claimId, reason: 'no', idempotency_key: key }, metadata } };
    case 'abandon':
      return { id, command: { type: 'abandon', data: { handoff_id: id, reason: 'gone', idempotency_key: key }, metadata } };
    case 'fail':
      return { id, command: { type: 'fail', data: { handoff_id: id, claim_id: claimId, reason: 'broke', idempotency_key: key }, metadata } };
    case 'archive':
      return { id, command: { type: 'archive', data: { handoff_id: id, idempotency_key: key }, metadata } };
    case 'requeue':
      return {
        id,
        command: {
          type: 'requeue_expired',
          data: {
            handoff_id: id,
            claim_id: claimId,
            ...(step.withLead ? { project_lead: 'lena' } : {}),
            escalation_handoff_id: `esc${world.seq}`,
            idempotency_key: key,
          },
          metadata: { actor: 'wd', actorKind: 'watchdog', now },
        },
      };
    case 'give_up':
      return {
        id,
        command: {
          type: 'give_up_offer',
          data: {
            handoff_id: id,
            ...(step.cooperative ? {} : { offered_version: 1 }),
            deliveries: 5,
            reason: 'the handler kept failing',
            ...(step.withLead ? { project_lead: 'lena' } : {}),
            escalation_handoff_id: `esc${world.seq}`,
            idempotency_key: key,
          },
          metadata,
        },
      };
    case 'replay':
      return world.lastAccepted ? { id: world.lastAccepted.data.handoff_id, command: world.lastAccepted } : null;
    default:
      return null;
  }
}

function runWalk(steps: Step[], lead: boolean): World {
  const world: World = { ledger: new Ledger(lead ? 'lena' : undefined), now: 0, seq: 0, lastAccepted: null, agentReturns: [] };
  for (const step of steps) {
    world.seq += 1;
    world.now += step.advance;
    const next = toCommand(step, world);
    if (!next) continue;
    const before = (world.ledger.streams.get(next.id) ?? []).length;
    const outcome = world.ledger.send(next.id, next.command);
    if (outcome.ok && step.op === 'replay') {
      // A replayed command (same idempotency key) is harmless.
      expect(outcome.events).toEqual([]);
    }
    if (outcome.ok && outcome.events.length > 0) {
      world.lastAccepted = next.command;
      if (next.command.type === 'return' && next.command.metadata.actorKind === 'agent') world.agentReturns.push({ handoffId: next.id, eventIndex: before });
    }
    checkInvariants(world);
  }
  return world;
}

function checkInvariants(world: World): void {
  // Policies never issue a command the target refuses (except the ledger's own stale guards).
  expect(world.ledger.refusedReactions.filter((r) => !r.endsWith('handoff_not_returned'))).toEqual([]);
  for (const [id, events] of world.ledger.streams) {
    const state = world.ledger.state(id);
    const parsed = HandoffRecordSchema.safeParse(toHandoffRecord(state));
    if (!parsed.success) throw new Error(`${id} folded to an invalid record: ${parsed.error.message}`);
    for (const event of events) {
      if (event.type === 'handoff.handback_decided' && state.status !== 'absent') {
        // Known hole (c): nobody decides on their own work.
        expect(state.reviewed_worker).toBeDefined();
        expect(event.data.decided_by).not.toBe(state.reviewed_worker);
      }
    }
  }
  for (const { handoffId, eventIndex } of world.agentReturns) {
    const event = world.ledger.streams.get(handoffId)![eventIndex]!;
    if (event.type !== 'handoff.returned') throw new Error(`expected a return at ${handoffId}#${eventIndex}`);
    // Evidence floor: an agent's `completed` is always backed by real evidence.
    if (event.data.report.outcome === 'completed') expect(hasEvidence(event.data.report.evidence)).toBe(true);
  }
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const item of Object.values(value as Record<string, unknown>)) deepFreeze(item);
  }
  return value;
}

describe('handoff properties', () => {
  it("the claim readers' fold (handoffClaimFold) is the ledger's fold without the work item, event by event: same view, same status, claim, run and agent fields", () => {
    fc.assert(
      fc.property(fc.array(stepArb, { minLength: 10, maxLength: 80, size: 'large' }), fc.boolean(), (steps, lead) => {
        const world = runWalk(steps, lead);
        for (const [id, events] of world.ledger.streams) {
          let full = handoffDecider.initialState();
          let light = handoffClaimFold.initialState();
          for (const event of events) {
            full = handoffDecider.evolve(full, event);
            light = handoffClaimFold.evolve(light, event);
            expect(handoffClaimView(id, light)).toEqual(handoffClaimView(id, full));
            if (full.status === 'absent') {
              expect(light).toEqual(full);
              continue;
            }
            expect(light).toEqual({ ...full, context: {}, acceptance: {}, summary: '' });
          }
        }
      }),
      { numRuns: 100 },
    );
  });

  it('folding any sequence of accepted commands never reaches an invalid state (HandoffRecordSchema holds throughout)', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { minLength: 10, maxLength: 80, size: 'large' }), fc.boolean(), (steps, lead) => {
        runWalk(steps, lead);
      }),
      { numRuns: 150 },
    );
  });

  it('the state rebuilt from the events equals the state the decider acted on, and evolve is deterministic and pure', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { minLength: 10, maxLength: 80, size: 'large' }), (steps) => {
        const world = runWalk(steps, true);
        for (const events of world.ledger.streams.values()) {
          // Incremental: each decision was made on fold(prefix); evolving step by step from frozen
          // states must reproduce the same states (no mutation, no hidden inputs).
          let state: HandoffState = deepFreeze(handoffDecider.initialState());
          for (const event of events as HandoffEvent[]) {
            const once = handoffDecider.evolve(state, event);
            const twice = handoffDecider.evolve(state, event);
            expect(twice).toEqual(once);
            state = deepFreeze(once);
          }
          expect(state).toEqual(fold(handoffDecider, events));
          expect(JSON.parse(JSON.stringify(state))).toEqual(state);
        }
      }),
      { numRuns: 100 },
    );
  });

  it('reactions are idempotent: running the policy for an event twice changes nothing the second time', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { minLength: 10, maxLength: 60, size: 'large' }), (steps) => {
        const world = runWalk(steps, true);
        const snapshot = JSON.stringify([...world.ledger.streams.entries()]);
        // Redeliver every event's reactions against the final states.
        for (const events of [...world.ledger.streams.values()]) {
          for (let i = 0; i < events.length; i++) {
            const state = fold(handoffDecider, events.slice(0, i + 1));
            for (const reaction of reactToHandoffEvent(events[i]!, { state, deriveId, projectLead: 'lena' })) {
              const result = handoffDecider.decide(reaction.command, world.ledger.state(reaction.aggregateId));
              expect(result.ok ? result.events : []).toEqual([]);
            }
          }
        }
        expect(JSON.stringify([...world.ledger.streams.entries()])).toBe(snapshot);
      }),
      { numRuns: 60 },
    );
  });
});
