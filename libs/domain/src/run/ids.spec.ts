import { IdSchema, Limits, MsgIds } from '@baton/contracts';
import { meshHandoffId, meshNoticeId, meshResumeHandoffId, meshStopId } from '../mesh';
import { deriveScopedId, handoffIdFor, noticeIdFor, stopIdFor } from './ids';

describe('ids derived from a cause are scoped by the run where the sender chose the id only within it', () => {
  it('the same result, message or answer id in two runs of one project derives different handoff, stop and notice ids', () => {
    for (const kind of ['result', 'message', 'resume'] as const) {
      const cause = { kind, id: 'r-1' };
      for (const derive of [handoffIdFor, stopIdFor, noticeIdFor]) {
        expect(derive('wr-a', cause)).not.toBe(derive('wr-b', cause));
        expect(derive('wr-a', cause)).toBe(derive('wr-a', { ...cause })); // the same on every call: redeliveries stay idempotent
      }
    }
    expect(handoffIdFor('wr-a', { kind: 'result', id: 'r-1' })).toBe('ho-r-wr-a:r-1');
    expect(stopIdFor('wr-a', { kind: 'message', id: 'm-1' })).toBe('stop-m-wr-a:m-1');
    expect(noticeIdFor('wr-a', { kind: 'resume', id: 'a-1' })).toBe('nt-a-wr-a:a-1');
  });

  it('a mesh turn or answer id reused by two mesh runs derives different ids', () => {
    for (const derive of [meshHandoffId, meshStopId, meshNoticeId, meshResumeHandoffId]) expect(derive('mesh-a', 't-1')).not.toBe(derive('mesh-b', 't-1'));
    expect(meshHandoffId('mesh-a', 't-1')).toBe('mh-r-mesh-a:t-1');
  });

  it('ids unique within the project on their own (a start, a stop request, a failed handoff) name themselves alone', () => {
    expect(handoffIdFor('wr-1', { kind: 'start', id: 'wr-1' })).toBe('ho-s-wr-1');
    expect(stopIdFor('wr-1', { kind: 'stop', id: 'pk-9' })).toBe('stop-x-pk-9');
    expect(handoffIdFor('wr-1', { kind: 'handoff_failed', id: 'h-3' })).toBe('ho-f-h-3');
  });

  it('a run id holding ":" never makes two (run, id) pairs meet: runs "a:b" + "c" and "a" + "b:c"', () => {
    const one = deriveScopedId('ho-r', 'a:b', 'c');
    const other = deriveScopedId('ho-r', 'a', 'b:c');
    expect(other).toBe('ho-r-a:b:c');
    expect(one).not.toBe(other);
    expect(one).toMatch(/^ho-r-a:b:c-[0-9a-f]{8}$/);
  });

  it('a pair too long for the id cap is clipped with a digest of both parts, stays a valid id and tells runs apart', () => {
    const run = `wr-${'x'.repeat(120)}`;
    const a = deriveScopedId('ho-r', run, 'r-1');
    const b = deriveScopedId('ho-r', `${run}y`, 'r-1');
    for (const id of [a, b]) {
      expect(id.length).toBeLessThanOrEqual(Limits.maxIdLength);
      expect(IdSchema.safeParse(id).success).toBe(true);
    }
    expect(a).not.toBe(b);
  });

  it('the Nats-Msg-Id of a result, message or answer names its run, so two runs reusing an id are two messages', () => {
    expect(MsgIds.result('acme', 'wr-a', 'r-1')).toBe('result:acme:wr-a/r-1');
    expect(MsgIds.result('acme', 'wr-a', 'r-1')).not.toBe(MsgIds.result('acme', 'wr-b', 'r-1'));
    expect(MsgIds.message('acme', 'wr-a', 'm-1')).not.toBe(MsgIds.message('acme', 'wr-b', 'm-1'));
    expect(MsgIds.answer('acme', 'wr-a', 'a-1')).not.toBe(MsgIds.answer('acme', 'wr-b', 'a-1'));
    expect(MsgIds.meshResult('acme', 'm-a', 't-1')).not.toBe(MsgIds.meshResult('acme', 'm-b', 't-1'));
    expect(MsgIds.meshAnswer('acme', 'm-a', 'a-1')).not.toBe(MsgIds.meshAnswer('acme', 'm-b', 'a-1'));
    // ids hold no '/', so run 'a' + id 'b/c' cannot be written and the split is unambiguous
    expect(IdSchema.safeParse('b/c').success).toBe(false);
  });
});
