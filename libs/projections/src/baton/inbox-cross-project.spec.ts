import type { HandoffEvent } from '@baton/contracts';
import { fold, handoffDecider, type HandoffCommand } from '@baton/domain';
import type { SequencedEvent } from '../store';
import { inboxProjection } from './inbox';

const T0 = '2026-01-01T00:00:00.000Z';
const later = (seconds: number) => new Date(Date.parse(T0) + seconds * 1000).toISOString();

/** A cross-project handoff (made in `target` for a run of `source`), claimed, its lease expired at its retry cap: the real decider's events. */
function escalatedCrossProject(source: string, target: string): SequencedEvent[] {
  const commands: HandoffCommand[] = [
    {
      type: 'create',
      data: {
        handoff_id: 'h-x',
        project: target,
        target_project: target,
        kind: 'task',
        priority: 'medium',
        from_agent: 'alice',
        to_agent: 'bob',
        summary: 'port the parser',
        context: {},
        acceptance: {},
        max_retries: 0,
        workflow_run_id: 'wr-1',
        cto_override: 'dec-1',
        cross_project: { source_project: source, source_visible: ['alice'], target_visible: ['bob', 'lena'], target_accepts: true },
        idempotency_key: 'create:h-x',
      },
      metadata: { actor: 'alice', actorKind: 'agent', now: T0 },
    },
    {
      type: 'claim',
      data: { handoff_id: 'h-x', claim_id: 'c1', lease_ms: 60_000, claimer_roles: [], idempotency_key: 'claim:c1' },
      metadata: { actor: 'bob', actorKind: 'agent', now: T0 },
    },
    {
      type: 'requeue_expired',
      data: { handoff_id: 'h-x', claim_id: 'c1', project_lead: 'lena', escalation_handoff_id: 'esc-c1', idempotency_key: 'requeue:c1' },
      metadata: { actor: 'wd', actorKind: 'watchdog', now: later(61) },
    },
  ];
  const events: HandoffEvent[] = [];
  for (const command of commands) {
    const decided = handoffDecider.decide(command, fold(handoffDecider, events));
    if (!decided.ok) throw new Error(decided.error.code);
    events.push(...decided.events);
  }
  return events.map((event, i) => ({
    id: `ev-${i}`,
    type: event.type,
    version: 1,
    aggregate: { kind: 'handoff', id: 'h-x' },
    project: target,
    occurredAt: T0,
    actor: 'x',
    origin: 'agent',
    causationId: null,
    correlationId: 'wr-1',
    payload: event.data,
    seq: i + 1,
  }));
}

describe("the inbox's escalation item of a cross-project handoff", () => {
  it("names its run's project (run_project): the run id alone would be read as the target project's", () => {
    const projection = inboxProjection();
    let state: unknown = null;
    const upserts: unknown[] = [];
    for (const event of escalatedCrossProject('src', 'tgt')) {
      if (!projection.handles(event.type)) continue;
      const stepped = projection.step(state as never, event);
      state = stepped.state ?? state;
      upserts.push(...stepped.ops.filter((op) => (op as { op: string }).op === 'item.upsert'));
    }
    expect(upserts).toEqual([
      expect.objectContaining({
        item: expect.objectContaining({ id: 'escalation:tgt:h-x', project: 'tgt', kind: 'escalation', workflow_run_id: 'wr-1', run_project: 'src' }),
      }),
    ]);
  });
});
