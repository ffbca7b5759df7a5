import { shareReads, type SeqSource } from './shared-reads';

type Item = { seq: number; id: string };

/** A source over seqs 1..n that counts how often it is opened and how many events it produced. */
function countingSource(n: number, opts: { failAt?: number } = {}) {
  const stats = { opened: 0, produced: 0, returned: 0 };
  const source: SeqSource<Item> = (fromSeq) =>
    (async function* () {
      stats.opened++;
      try {
        for (let seq = fromSeq; seq <= n; seq++) {
          if (seq === opts.failAt) throw new Error(`read failed at #${seq}`);
          if (seq % 7 === 0) await new Promise((resolve) => setImmediate(resolve));
          stats.produced++;
          yield { seq, id: `e${seq}` };
        }
      } finally {
        stats.returned++;
      }
    })();
  return { source, stats };
}

async function collect(iterable: AsyncIterable<Item>, pauseEvery = 0): Promise<number[]> {
  const seqs: number[] = [];
  for await (const event of iterable) {
    seqs.push(event.seq);
    if (pauseEvery > 0 && seqs.length % pauseEvery === 0) await new Promise((resolve) => setTimeout(resolve, 1));
  }
  return seqs;
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe('a replay source shared by concurrent rebuilds', () => {
  it('five readers from the same sequence share one read: the source is opened once, and each reader gets every event in order', async () => {
    const { source, stats } = countingSource(1_000);
    const shared = shareReads(source, { window: 64 });
    const results = await Promise.all([0, 3, 5, 11, 17].map((pause) => collect(shared(1), pause)));
    for (const seqs of results) expect(seqs).toEqual(range(1, 1_000));
    expect(stats.opened).toBe(1);
    expect(stats.produced).toBe(1_000);
  });

  it('a reader far ahead waits for the slowest within the window; a reader starting a little later still joins at the first event', async () => {
    const { source, stats } = countingSource(500);
    const shared = shareReads(source, { window: 10 });
    const fast = shared(1)[Symbol.asyncIterator]();
    const got: number[] = [];
    for (let i = 0; i < 4; i++) got.push(((await fast.next()).value as Item).seq);
    const late = shared(1)[Symbol.asyncIterator]();
    expect(((await late.next()).value as Item).seq).toBe(1); // joined the same read late
    for (let i = 0; i < 6; i++) got.push(((await fast.next()).value as Item).seq);
    expect(got).toEqual(range(1, 10));
    expect(((await fast.next()).value as Item).seq).toBe(11);
    // The buffer is full (ten events from the late reader's position on): the fast reader waits.
    let moved = false;
    const pending = fast.next().then(() => (moved = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(moved).toBe(false);
    await late.next(); // the slowest moves on: room for one more
    await pending;
    expect(moved).toBe(true);
    await fast.return?.(undefined);
    await late.return?.(undefined);
    expect(stats.opened).toBe(1);
  });

  it('a reader that stops early leaves the read without holding the others back', async () => {
    const { source, stats } = countingSource(300);
    const shared = shareReads(source, { window: 8 });
    const quitter = (async () => {
      const seqs: number[] = [];
      for await (const event of shared(1)) {
        seqs.push(event.seq);
        if (seqs.length === 5) break;
      }
      return seqs;
    })();
    const full = collect(shared(1), 4);
    expect(await quitter).toEqual(range(1, 5));
    expect(await full).toEqual(range(1, 300));
    expect(stats.opened).toBe(1);
  });

  it('a call from another sequence, or after the shared read moved on, opens its own read', async () => {
    const { source, stats } = countingSource(50);
    const shared = shareReads(source);
    expect(await collect(shared(1))).toEqual(range(1, 50));
    expect(await collect(shared(1))).toEqual(range(1, 50)); // the first read is over: a fresh one
    expect(await collect(shared(40))).toEqual(range(40, 50));
    expect(stats.opened).toBe(3);
    expect(stats.returned).toBe(3);
  });

  it('a failing read fails every reader of it, with the source error', async () => {
    const { source } = countingSource(100, { failAt: 42 });
    const shared = shareReads(source, { window: 16 });
    const outcomes = await Promise.allSettled([collect(shared(1)), collect(shared(1), 3)]);
    for (const outcome of outcomes) expect(outcome).toMatchObject({ status: 'rejected', reason: expect.objectContaining({ message: 'read failed at #42' }) });
  });

  it('when every reader stops, the underlying read is closed', async () => {
    const { source, stats } = countingSource(10_000);
    const shared = shareReads(source, { window: 32 });
    for await (const event of shared(1)) if (event.seq === 3) break;
    await new Promise((resolve) => setImmediate(resolve));
    expect(stats.returned).toBe(1);
    expect(stats.produced).toBeLessThan(100);
  });
});
