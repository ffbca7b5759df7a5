import { foreignMsgId, MsgIds } from './msg-ids';

describe('foreignMsgId: an inbox message may carry only its own project and kind in a Baton-form id', () => {
  const on = (subject: string, id: string | undefined) => foreignMsgId('baton', subject, id);

  it("Baton's own ids pass, retries re-keyed by publishUnderOwnId too", () => {
    expect(on('baton.in.acme.start', MsgIds.start('acme', 'wr-1'))).toBeNull();
    expect(on('baton.in.acme.result.support', MsgIds.result('acme', 'wr-1', 'r:1'))).toBeNull();
    expect(on('baton.in.acme.mesh_result.triage', MsgIds.meshResult('acme', 'm-1', 'r-2'))).toBeNull();
    expect(on('baton.in.acme.stop', `${MsgIds.stop('acme', 'pk')}:1:42`)).toBeNull();
  });

  it('another project or another kind is named', () => {
    expect(on('baton.in.acme.start', MsgIds.start('globex', 'wr-1'))).toContain("names project 'globex', the subject 'acme'");
    expect(on('baton.in.acme.result.support', MsgIds.start('acme', 'wr-1'))).toContain('names a start, the subject a result');
  });

  it('ids of another form pass: none, a client scheme, a redrive, a kind with no project part, a part that is no project key', () => {
    for (const id of [undefined, 'my-own-123', 'redrive:BATON_DLQ:7', 'start:wr-1', 'start:WR:1', 'result:a b:c', '']) {
      expect({ id, refused: on('baton.in.acme.start', id) }).toEqual({ id, refused: null });
    }
  });

  it('subjects outside the inbox are not judged', () => {
    expect(on('baton.ev.acme.run.wr-1', 'start:globex:wr-1')).toBeNull();
    expect(on('other.in.acme.start', 'start:globex:wr-1')).toBeNull();
  });
});
