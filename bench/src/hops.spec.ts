import { totalCpu } from './hops';

describe('CPU per hop over all processes', () => {
  it('sums the per-process figures, and refuses to sum when one was not measured', () => {
    expect(totalCpu({ ledger: 2.07, router: 2.65, 'nats-server': 1.18 })).toBe(5.9);
    expect(totalCpu({ ledger: 2.07, 'nats-server': null })).toBeNull();
    expect(totalCpu({})).toBeNull();
  });
});
