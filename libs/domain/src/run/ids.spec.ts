import { IdSchema, Limits, MsgIds } from '@baton/contracts';
import { meshHandoffId, meshNoticeId, meshResumeHandoffId, meshStopId } from '../mesh';
import { deriveId, deriveScopedId, handoffIdFor, noticeIdFor, routeHandoffIdFor, stopIdFor } from './ids';

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

  it('a run id or a cause id holding ":" never makes two (run, id) pairs meet: runs "a:b" + "c" and "a" + "b:c"', () => {
    const one = deriveScopedId('ho-r', 'a:b', 'c');
    const other = deriveScopedId('ho-r', 'a', 'b:c');
    expect(one).not.toBe(other);
    // Both take the sealed form: the text, `::` and 128 bits of SHA-256 of the prefix and both parts.
    expect(one).toMatch(/^ho-r-a:b:c::[0-9a-f]{32}$/);
    expect(other).toMatch(/^ho-r-a:b:c::[0-9a-f]{32}$/);
  });

  it('the black-box attack: run "k402:a" + result "b" and run "k402" + result "a:b-<its digest>" share no stop packet, notice or handoff', () => {
    // Before, the first took the digest form `stop-r-k402:a:b-a39684a5` (shown in the views) and the
    // second the plain form of the very same text.
    for (const derive of [stopIdFor, handoffIdFor, noticeIdFor]) {
      const first = derive('k402:a', { kind: 'result', id: 'b' });
      expect(derive('k402', { kind: 'result', id: 'a:b-a39684a5' })).not.toBe(first);
      // ...nor does copying what the first one shows now.
      const copied = first.slice(first.indexOf('k402:') + 'k402:'.length);
      expect(derive('k402', { kind: 'result', id: copied })).not.toBe(first);
      expect(IdSchema.safeParse(derive('k402', { kind: 'result', id: copied })).success).toBe(true);
    }
    expect(stopIdFor('k402', { kind: 'result', id: 'a:b-a39684a5' })).not.toBe('stop-r-k402:a:b-a39684a5');
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

  it('plain forms stay as they were below the cap; at the cap and past it the sealed forms take over', () => {
    const max = Limits.maxIdLength;
    // deriveId: plain while shorter than the cap, exactly the cap long (clipped, `-`, digest) from it on.
    const fits = 'x'.repeat(max - 'ho-s-'.length - 1);
    expect(deriveId('ho-s', fits)).toBe(`ho-s-${fits}`);
    const atCap = `${fits}y`;
    expect(`ho-s-${atCap}`).toHaveLength(max);
    expect(deriveId('ho-s', atCap)).toHaveLength(max);
    expect(deriveId('ho-s', atCap)).toMatch(/^ho-s-x+-[0-9a-f]{32}$/);
    expect(deriveId('ho-s', atCap)).not.toBe(`ho-s-${atCap}`);
    // deriveScopedId: plain while shorter than the cap and neither part holds `:`.
    const scope = 'w'.repeat(max - 'ho-r-'.length - ':r'.length - 1);
    expect(deriveScopedId('ho-r', scope, 'r')).toBe(`ho-r-${scope}:r`);
    expect(deriveScopedId('ho-r', `${scope}w`, 'r')).toMatch(/^ho-r-w+::[0-9a-f]{32}$/);
    expect(deriveScopedId('ho-r', `${scope}w`, 'r')).toHaveLength(max);
  });

  it('a later route of one cause in one decision meets no first route, in this run or another', () => {
    const result = { kind: 'result' as const, id: 'r' };
    expect(routeHandoffIdFor('wr', result, 1)).toBe(handoffIdFor('wr', result));
    const second = routeHandoffIdFor('wr', result, 2);
    // It was `ho-r-wr:r-2`: the first route of result `r-2`. And `ho-s-wr-2` was the start of run `wr-2`.
    expect(second).not.toBe(handoffIdFor('wr', { kind: 'result', id: 'r-2' }));
    expect(routeHandoffIdFor('wr', { kind: 'start', id: 'wr' }, 2)).not.toBe(handoffIdFor('wr-2', { kind: 'start', id: 'wr-2' }));
    expect(second).toHaveLength(Limits.maxIdLength);
    expect(second).toMatch(/^ho-r-wr:r:2_+-[0-9a-f]{32}$/);
    expect(routeHandoffIdFor('wr', result, 3)).not.toBe(second);
    expect(routeHandoffIdFor('wr', result, 2)).toBe(second);
    expect(IdSchema.safeParse(second).success).toBe(true);
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
