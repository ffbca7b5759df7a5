import { stopDestination } from './destination';

const agent = 'billing';

describe('stopDestination — destinations (seed 003)', () => {
  it('default destination: human queue; if you cannot name the destination, it is humans', () => {
    expect(stopDestination({ agent })).toEqual({ ok: true, destination: { kind: 'human_queue' } });
    expect(stopDestination({ agent, destination: { agent: 'humans', honors_stop: false } })).toEqual({ ok: true, destination: { kind: 'human_queue' } });
  });

  it('next track: another specialist, still with a packet, still with a stop — when it honours stop and has its own budget', () => {
    expect(stopDestination({ agent, destination: { agent: 'refund-specialist', honors_stop: true, budget: { max_steps: 10 } } })).toEqual({
      ok: true,
      destination: { kind: 'specialist', agent: 'refund-specialist' },
    });
  });

  it.each([
    ['exec', { agent: 'exec', honors_stop: true, budget: { max_steps: 5 } }, 'exec'],
    ['a shell runner', { agent: 'shell_runner', honors_stop: true, budget: { max_steps: 5 } }, 'exec'],
    ['computer use', { agent: 'computer_use', honors_stop: true, budget: { max_steps: 5 } }, 'computer_use'],
    ['computer-use agent', { agent: 'ComputerUse-agent', honors_stop: true, budget: { max_steps: 5 } }, 'computer_use'],
    ['a new unbounded agent', { agent: 'be_clever', honors_stop: true }, 'unbounded'],
    ['an agent with a zero budget', { agent: 'helper', honors_stop: true, budget: { max_steps: 0 } }, 'unbounded'],
    ['a destination that cannot honour stop', { agent: 'helper', honors_stop: false, budget: { max_steps: 5 } }, 'cannot_honor_stop'],
    ['the stopped agent itself (a second loop)', { agent: 'billing', honors_stop: true, budget: { max_steps: 5 } }, 'self'],
  ])('do not handoff to %s: refused with destination_not_allowed', (_label, destination, reason) => {
    const result = stopDestination({ agent, destination });
    expect(result).toMatchObject({ ok: false, error: { code: 'destination_not_allowed', details: { reason } } });
  });
});
