import { waitFor } from './wait';

describe('waitFor', () => {
  it('resolves with the first value that is not undefined, null or false, sync or async', async () => {
    let calls = 0;
    const answers = [undefined, null, false, 0, 'later'];
    await expect(waitFor(() => answers[calls++], 'a ready value', { timeoutMs: 1_000, everyMs: 1 })).resolves.toBe(0);
    expect(calls).toBe(4);

    calls = 0;
    await expect(waitFor(async () => (++calls >= 3 ? `after ${calls}` : undefined), 'the third call', { timeoutMs: 1_000, everyMs: 1 })).resolves.toBe(
      'after 3',
    );
    expect(calls).toBe(3);

    await expect(waitFor(() => true, 'true', { timeoutMs: 0 })).resolves.toBe(true);
  });

  it('probes at least once, then every everyMs until the time is up', async () => {
    let calls = 0;
    const started = Date.now();
    await expect(
      waitFor(
        () => {
          calls++;
          return undefined;
        },
        'never',
        { timeoutMs: 0 },
      ),
    ).rejects.toThrow('never');
    expect(calls).toBe(1);

    calls = 0;
    await expect(
      waitFor(
        () => {
          calls++;
          return false;
        },
        'never',
        { timeoutMs: 200, everyMs: 50 },
      ),
    ).rejects.toThrow('never');
    expect(calls).toBeGreaterThanOrEqual(2); // about 5 (0, 50, 100, 150, 200 ms), fewer on a busy machine
    expect(calls).toBeLessThanOrEqual(6);
    expect(Date.now() - started).toBeGreaterThanOrEqual(195);
  });

  it('times out naming what it waited for, how long, and the last value the probe gave', async () => {
    const wait = waitFor(async () => null, 'the run to be routed', { timeoutMs: 30, everyMs: 5 });
    await expect(wait).rejects.toThrow('timed out waiting for the run to be routed (30 ms); last value: null');

    await expect(waitFor(() => false, 'x', { timeoutMs: 10, everyMs: 5 })).rejects.toThrow('last value: false');
    await expect(waitFor(() => undefined, 'x', { timeoutMs: 10, everyMs: 5 })).rejects.toThrow('last value: undefined');
  });

  it('keeps polling after a probe throws or rejects, and resolves once it gives a value', async () => {
    let calls = 0;
    const probe = async () => {
      calls++;
      if (calls === 1) throw new Error('stream not found');
      if (calls === 2) return Promise.reject(new Error('consumer not found'));
      return { ok: calls };
    };
    await expect(waitFor(probe, 'the consumer', { timeoutMs: 1_000, everyMs: 1 })).resolves.toEqual({ ok: 3 });
  });

  it('reports the last probe error when the time is up, and keeps it as the cause', async () => {
    const boom = new TypeError('boom');
    const wait = waitFor(
      () => {
        throw boom;
      },
      'the dead letter',
      { timeoutMs: 20, everyMs: 5 },
    );
    await expect(wait).rejects.toThrow('timed out waiting for the dead letter (20 ms); last error: TypeError: boom');
    await expect(wait).rejects.toMatchObject({ cause: boom });
  });

  it('reports what the last probe gave: a value after an error, an error after a value', async () => {
    let calls = 0;
    const errorThenNull = () => {
      if (calls++ === 0) throw new Error('early');
      return null;
    };
    await expect(waitFor(errorThenNull, 'x', { timeoutMs: 20, everyMs: 5 })).rejects.toThrow(/last value: null$/);

    calls = 0;
    const valueThenError = async () => {
      if (calls++ === 0) return false;
      throw new Error('late');
    };
    await expect(waitFor(valueThenError, 'x', { timeoutMs: 20, everyMs: 5 })).rejects.toThrow(/last error: Error: late$/);
  });

  it('shows values it cannot serialise, and shortens long ones', async () => {
    const circular: Record<string, unknown> = {};
    circular['self'] = circular;
    await expect(
      waitFor(
        () => {
          throw circular;
        },
        'x',
        { timeoutMs: 0 },
      ),
    ).rejects.toThrow('last error: [object Object]');
    await expect(
      waitFor(
        () => {
          throw 'x'.repeat(1_000);
        },
        'x',
        { timeoutMs: 0 },
      ),
    ).rejects.toThrow(`last error: "${'x'.repeat(299)}…`);
  });
});
