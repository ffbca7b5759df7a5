import { waitFor } from './wait';

describe('waitFor', () => {
  it('polls until the probe gives a value, and returns it', async () => {
    let calls = 0;
    await expect(waitFor(async () => (++calls >= 3 ? `after ${calls}` : undefined), 'the third call', 1_000, 1)).resolves.toBe('after 3');
  });

  it('rejects naming what it waited for once the time is up; a throwing probe fails the wait', async () => {
    await expect(waitFor(async () => undefined, 'something that never comes', 20, 5)).rejects.toThrow('timed out waiting for something that never comes');
    await expect(waitFor(async () => Promise.reject(new Error('boom')), 'x', 1_000, 5)).rejects.toThrow('boom');
  });
});
