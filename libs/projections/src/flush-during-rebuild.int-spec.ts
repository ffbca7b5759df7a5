import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createBatonProjector } from './baton';
import { foldScenario, scenarioSequenced, scenarioSteps } from './baton/scenario';
import { ShadowLostError } from './errors';
import type { FoldTarget } from './rebuilder';
import { createRedis, type RedisHandle } from './redis';
import { diffSnapshots } from './snapshot';
import { createProjectionStore, type ProjectionStore, type ReplaySource, type SequencedEvent } from './store';

/*
 * Issue 12: a real FLUSHALL in the middle of a bulk rebuild (a private redis-server on a free
 * loopback port; the shared Redis is never flushed). The owner token went with the data, so the
 * next bulk write of every projection is refused: each rebuild fails with ShadowLostError, writes
 * nothing more and swaps nothing; a rebuild afterwards is complete.
 */

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  server.close();
  await once(server, 'close');
  return port;
}

async function waitPort(port: number): Promise<void> {
  for (let i = 0; i < 150; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`redis-server did not listen on ${port}`);
}

const log: SequencedEvent[] = [];
for (let p = 0; p < 8; p++) {
  for (const e of foldScenario(scenarioSteps({ project: `p${p}` }))) {
    log.push(scenarioSequenced(e, log.length + 1, `p${p}`));
  }
}

describe('FLUSHALL during a bulk rebuild (private redis-server)', () => {
  let dir: string;
  let child: ChildProcess;
  let redis: RedisHandle;
  let store: ProjectionStore;

  beforeAll(async () => {
    const port = await freePort();
    dir = await mkdtemp(join(tmpdir(), 'baton-flush-redis-'));
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' });
    await waitPort(port);
    redis = createRedis(`redis://127.0.0.1:${port}`);
    store = createProjectionStore({ redis: redis.client, prefix: 'flush:proj' });
  });

  afterAll(async () => {
    await redis?.close();
    child?.kill('SIGKILL');
    if (child) await once(child, 'exit').catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });

  it("every projection's rebuild stops with ShadowLostError, nothing is written after the flush and nothing swapped; the next rebuild is complete", async () => {
    const projector = createBatonProjector({ store });
    for (const event of log) await projector.apply(event);
    const reference = await Promise.all(projector.projections.map((p) => store.snapshot(p.name)));
    let flushed = false;
    const source: ReplaySource = (fromSeq) =>
      (async function* () {
        for (const event of log) {
          if (event.seq < fromSeq) continue;
          if (event.seq === 150 && !flushed) {
            flushed = true;
            await redis.client.flushall();
          }
          yield event;
        }
      })();
    const failure = await store.rebuildMany(projector.projections as unknown as FoldTarget[], source, { chunkEvents: 20 }).catch((error: unknown) => error);
    expect(flushed).toBe(true);
    expect(failure).toBeInstanceOf(ShadowLostError);
    // Nothing was written after the flush: no shadow, no pointer, no counter, no progress entry.
    expect(await redis.client.dbsize()).toBe(0);
    const again = await store.rebuildMany(projector.projections as unknown as FoldTarget[], source, { chunkEvents: 20 });
    for (const [i, p] of projector.projections.entries()) {
      expect(again[p.name]).toMatchObject({ status: 'swapped', lastSeq: log.length });
      expect(diffSnapshots(reference[i]!, await store.snapshot(p.name))).toEqual([]);
    }
  });
});
