import { cpuFigures, formatCpu, type CpuReading } from './platform';

describe('CPU figures between two readings', () => {
  const at = (seconds: number, pid = 10, started = 500): CpuReading => ({ pid, started, seconds });

  it('divides the CPU each process spent by the work done', () => {
    const figures = cpuFigures({ ledger: at(1.0), bench: at(2.0, 11) }, { ledger: at(1.5), bench: at(2.1, 11) }, 100, 1000);
    expect(figures).toEqual({ values: { ledger: 5, bench: 1 }, not_measured: {} });
  });

  it('refuses, with a reason, what it could not measure: never a negative or borrowed number', () => {
    const figures = cpuFigures(
      {
        'nats-server': { pid: null, seconds: null, reason: 'no process listens on 127.0.0.1:4222' },
        'redis-server': at(3.0, 20),
        other: at(5.0, 30),
        reused: at(1.0, 40, 100),
        gone: at(1.0, 50),
      },
      {
        'nats-server': { pid: null, seconds: null, reason: 'no process listens on 127.0.0.1:4222' },
        'redis-server': at(3.5, 21),
        other: at(4.0, 30),
        reused: at(0.5, 40, 900),
        gone: { pid: 50, seconds: null, reason: 'cannot read /proc/50/stat (the process exited?)' },
      },
      100,
      1000,
    );
    expect(figures.values).toEqual({ 'nats-server': null, 'redis-server': null, other: null, reused: null, gone: null });
    expect(figures.not_measured).toEqual({
      'nats-server': 'no process listens on 127.0.0.1:4222',
      'redis-server': 'a different process at the end of the window (pid 20, then 21)',
      other: 'CPU time went backwards for pid 30',
      reused: 'pid 40 is another process at the end of the window (it exited and the pid was reused)',
      gone: 'cannot read /proc/50/stat (the process exited?)',
    });
  });

  it('has nothing to divide by when no work was done, and no figure for a process read at one end only', () => {
    expect(cpuFigures({ a: at(1) }, { a: at(2) }, 0, 1000)).toEqual({ values: { a: null }, not_measured: { a: 'no work done in the window to divide by' } });
    expect(cpuFigures({ a: at(1) }, {}, 10, 1000).not_measured).toEqual({ a: 'not read at both ends of the window' });
  });

  it('reads "not measured: <reason>" in the readable output', () => {
    expect(formatCpu({ values: { ledger: 3.2, 'nats-server': null }, not_measured: { 'nats-server': 'no process listens on 127.0.0.1:4222' } })).toBe(
      'ledger 3.2, nats-server not measured: no process listens on 127.0.0.1:4222',
    );
  });
});
