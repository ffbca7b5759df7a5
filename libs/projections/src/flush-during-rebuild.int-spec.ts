// Test only: the private servers every project's specs share (not part of @baton/eventstore's API).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startRedisServer, type PrivateServer } from '../../eventstore/src/int/servers';
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

const log: SequencedEvent[] = [];
for (let p = 0; p < 8; p++) {
  for (const e of foldScenario(scenarioSteps({ project: `p${p}` }))) {
    log.push(scenarioSequenced(e, log.length + 1, `p${p}`));
  }
}

describe('FLUSHALL during a bulk rebuild (private redis-server)', () => {
  let server: PrivateServer | undefined;
  let redis: RedisHandle;
  let store: ProjectionStore;

  beforeAll(async () => {
    server = await startRedisServer();
    redis = createRedis(server.url);
    store = createProjectionStore({ redis: redis.client, prefix: 'flush:proj' });
  });

  afterAll(async () => {
    await redis?.close();
    await server?.remove();
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
