import { foldScenario } from './scenario';

describe('the example scenario', () => {
  it('is accepted by the real deciders and produces every kind of inbox event', () => {
    const events = foldScenario();
    const types = events.map((e) => e.event.type);
    for (const type of ['run.stopped', 'run.held', 'run.resumed', 'handoff.returned', 'handoff.handback_decided', 'handoff.escalated', 'run.notice_emitted']) {
      expect(types).toContain(type);
    }
    const created = events.filter((e) => e.event.type === 'handoff.created').map((e) => e.id);
    expect(created).toEqual(expect.arrayContaining(['h-1', 'hb-h-1', 'h-2', 'hb-h-2', 'h-3']));
  });
});
