import { createEventRegistry, HandoffRecordSchema, type HandoffEvent } from '@baton/contracts';
import { evolveHandoff, initialHandoffState, toHandoffRecord, type HandoffState } from '@baton/domain';
import { canonicalJson, type JsonValue } from '../canonical-json';
import type { SequencedEvent } from '../store';
import { HandoffKeys, handoffRecordOfState, handoffsProjection, summarizeHandoffEvent } from './handoffs';
import { foldScenario, scenarioEnvelope } from './scenario';

/*
 * The `handoffs` projection keeps one value per handoff, its folded state, and renders the
 * HandoffRecord from it when read. For every handoff of the example scenario, after each of its
 * events, the record rendered from the state as Redis holds it (canonical JSON, read back) must be
 * the record the domain computes from a fold of the same events — what the projection stored
 * before version 3 — and no op may write a record key any more.
 */
describe('handoffs projection: the record is rendered from the stored state', () => {
  it('equals toHandoffRecord of a fold of the events, after every event of every handoff, and validates', () => {
    const registry = createEventRegistry();
    const projection = handoffsProjection();
    const stored = new Map<string, JsonValue | null>();
    const folded = new Map<string, HandoffState>();
    let checked = 0;
    for (const [index, e] of foldScenario().entries()) {
      if (e.aggregate !== 'handoff') continue;
      const event: SequencedEvent = { ...scenarioEnvelope(registry, e, `ev-${index}`, 'p'), seq: index + 1 };
      const key = projection.stateKeyOf(event) as string;
      expect(key).toBe(HandoffKeys.state('p', e.id));
      const step = projection.step(stored.get(key) ?? null, event);
      for (const op of step.ops) expect('key' in op ? op.key : '').not.toMatch(/^h:/);
      // What Redis holds and a read returns: the canonical text of the state, parsed.
      if (step.state !== undefined) stored.set(key, step.state === null ? null : (JSON.parse(canonicalJson(step.state)) as JsonValue));
      const domain = evolveHandoff(folded.get(e.id) ?? initialHandoffState(), e.event as HandoffEvent);
      folded.set(e.id, domain);

      const rendered = handoffRecordOfState(stored.get(key) ?? null);
      const expected = toHandoffRecord(domain);
      // Compared as stored JSON (what the API serves): no undefined members, same values.
      expect(rendered === null ? null : JSON.parse(canonicalJson(rendered))).toEqual(expected === null ? null : JSON.parse(canonicalJson(expected)));
      if (rendered !== null) expect(HandoffRecordSchema.safeParse(rendered).success).toBe(true);
      checked++;
    }
    expect(checked).toBeGreaterThanOrEqual(10);
    expect(new Set([...folded.values()].map((s) => s.status)).size).toBeGreaterThanOrEqual(4);
  });

  it('renders nothing for a missing or malformed state', () => {
    expect(handoffRecordOfState(null)).toBeNull();
    expect(handoffRecordOfState([1, 2] as JsonValue)).toBeNull();
    expect(handoffRecordOfState({ damaged: true })).toBeNull();
    expect(handoffRecordOfState({ status: 'absent' })).toBeNull();
  });
});

describe('handoffs projection: the timeline line of an abandon', () => {
  const abandoned = (extra: Record<string, unknown>): HandoffEvent =>
    ({
      type: 'handoff.abandoned',
      data: { handoff_id: 'h-1', at: '2026-01-01T00:00:00.000Z', idempotency_key: 'k', abandoned_by: 'sam', reason: 'not needed', ...extra },
    }) as HandoffEvent;

  it('names the project of a delegator that withdrew a cross-project handoff from its own; a local abandon reads as before', () => {
    expect(summarizeHandoffEvent(abandoned({ abandoned_by_project: 'src' }))).toBe('abandoned by sam of project src: not needed');
    expect(summarizeHandoffEvent(abandoned({}))).toBe('abandoned by sam: not needed');
  });
});
