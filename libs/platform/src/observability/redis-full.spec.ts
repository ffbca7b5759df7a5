import { RedisFullWatch } from './redis-full';

/*
 * A full Redis is said once (FullWatch's lines, as for a full JetStream): a warn when writes start
 * being refused, at most one summary a window, an info when a write goes through; each refusal
 * counted once; errors other than Redis's OOM refusal ignored. Pure: Redis's reply is its message.
 */

const oom = () => new Error("OOM command not allowed when used memory > 'maxmemory'. script: 3922077457713c6fa11bedcefaeaf3d8905643c3, on @user_script:1.");

describe('RedisFullWatch', () => {
  it('says a full Redis once, sums up a window, ends with a line; status and the gauge follow it; other errors are not counted', () => {
    let now = 0;
    let counted = 0;
    const lines: Array<{ level: string; msg: string; fields: Record<string, unknown> }> = [];
    const watch = new RedisFullWatch(
      { info: (msg, fields) => lines.push({ level: 'info', msg, fields }), warn: (msg, fields) => lines.push({ level: 'warn', msg, fields }) },
      { windowMs: 1_000, now: () => now, onRefused: () => counted++ },
    );
    expect(watch.refused('projections #1..#9', new Error('Command timed out'))).toBe(false);
    expect(watch.status()).toEqual({ full: false, since: null, refused: 0 });
    for (let t = 0; t < 300; t++) {
      now = t;
      expect(watch.refused(`projections #${t}`, oom())).toBe(true);
    }
    expect(lines).toEqual([
      {
        level: 'warn',
        msg: 'redis full: projection writes refused; the projections wait until Redis has room (docs/sre.md, What fills Redis)',
        fields: expect.objectContaining({ limit: 'maxmemory', write: 'projections #0', error: expect.stringContaining('OOM command not allowed') }),
      },
    ]);
    expect(watch.full()).toBe(true);
    expect(watch.status()).toEqual({ full: true, since: new Date(0).toISOString(), refused: 300 });
    now = 1_000;
    watch.refused('projections #1000', oom());
    expect(lines[1]).toMatchObject({
      level: 'warn',
      msg: 'redis still full: projection writes refused',
      fields: { full: true, held_back: 299, refused: 300, first_write: 'projections #1', last_write: 'projections #299' },
    });
    now = 1_500;
    watch.wrote();
    expect(lines[2]).toMatchObject({
      level: 'info',
      msg: 'redis full no longer: projection writes applied',
      fields: { refused: 301, held_back: 1, full_ms: 1_500 },
    });
    expect(counted).toBe(301);
    expect(watch.full()).toBe(false);
    expect(watch.status()).toEqual({ full: false, since: null, refused: 0 });
    watch.wrote();
    watch.stop();
    expect(lines).toHaveLength(3);
  });
});
