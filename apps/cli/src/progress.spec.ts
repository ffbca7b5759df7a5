import { bufferedIo } from './output';
import { formatCount, formatDuration, ProgressLine } from './progress';

describe('progress on stderr: events done / total, rate, time left, summary', () => {
  it('on a terminal redraws one line at most every 100 ms, then prints the summary', () => {
    const io = bufferedIo(true);
    let now = 0;
    const line = new ProgressLine(io, 'replay', 10_000, { now: () => now });
    now = 50;
    line.update({ done: 100 });
    now = 60;
    line.update({ done: 200 }); // within 100 ms of the last draw: not drawn
    now = 2_000;
    line.update({ done: 4_000 });
    const drawn = io.err().split('\r\x1b[2K').filter(Boolean);
    expect(drawn).toHaveLength(2);
    expect(drawn[1]).toBe('replay [##########..............] 4 000/10 000 events  40 %  2 000/s  3 s left');
    expect(io.out()).toBe('');
    now = 4_000;
    line.update({ done: 10_000, note: 'catching up' });
    line.finish('inbox rebuilt');
    expect(io.err().endsWith('\r\x1b[2Kreplay: 10 000 events in 4 s (2 500/s); inbox rebuilt\n')).toBe(true);
  });

  it('elsewhere prints a plain line every 10 % or every 10 s, and the rate follows the last seconds', () => {
    const io = bufferedIo(false);
    let now = 0;
    const line = new ProgressLine(io, 'verify', 1_000, { now: () => now });
    for (let done = 10; done <= 1_000; done += 10) {
      now += 100;
      line.update({ done });
    }
    const lines = io.err().trim().split('\n');
    // The first update (0 %), then one line per 10 %.
    expect(lines).toHaveLength(11);
    expect(lines[0]).toBe('verify: 10/1 000 events  1 %  100/s  10 s left');
    expect(lines[10]).toBe('verify: 1 000/1 000 events  100 %  100/s  0 s left');
    // Slow now: a line after 10 s even without a new decile; the rate is the recent one.
    const slow = new ProgressLine(io, 'slow', 1_000_000, { now: () => now });
    now += 1_000;
    slow.update({ done: 50_000 });
    now += 11_000;
    slow.update({ done: 51_000 });
    expect(io.err().trim().split('\n').at(-1)).toMatch(/^slow: 51 000\/1 000 000 events {2}5 % {2}\d+\/s {2}\d+:\d\d:\d\d left$/);
    expect(slow.rate(now)).toBeLessThan(1_000);
  });

  it('a new note is said at once, and a catch-up counts on from where the first pass stopped (verify catching up with the live projections is never silent)', () => {
    const io = bufferedIo(false);
    let now = 0;
    const line = new ProgressLine(io, 'verify', 1_000, { now: () => now });
    now = 1_000;
    line.update({ done: 1_000 });
    now = 1_500;
    line.update({ done: 1_000, note: 'comparing with the live projections' });
    expect(io.err().trim().split('\n').at(-1)).toMatch(/^verify: 1 000\/1 000 events {2}100 % .*\(comparing with the live projections\)$/);
    // The catch-up pass reads the events applied meanwhile: past the total counted at the start.
    now = 2_000;
    line.update({ done: 1_040, total: 1_000, note: 'catching up with the live projections, round 1' });
    expect(io.err().trim().split('\n').at(-1)).toMatch(/^verify: 1 040\/1 040 events {2}100 % .*\(catching up with the live projections, round 1\)$/);
    now = 2_100;
    line.update({ done: 1_040, note: 'comparing the keys that can have changed (round 1)' });
    expect(io.err().trim().split('\n').at(-1)).toMatch(/^verify: 1 040\/1 040 events .*\(comparing the keys that can have changed \(round 1\)\)$/);
    line.finish('every projection matches the stream');
    expect(io.err().trim().split('\n').at(-1)).toBe('verify: 1 040 events in 2 s (495/s); every projection matches the stream');
  });

  it('formats counts and durations', () => {
    expect(formatCount(1234567)).toBe('1 234 567');
    expect(formatDuration(5)).toBe('5 s');
    expect(formatDuration(125)).toBe('2:05');
    expect(formatDuration(3 * 3600 + 61)).toBe('3:01:01');
    expect(formatDuration(Number.POSITIVE_INFINITY)).toBe('?');
  });
});
