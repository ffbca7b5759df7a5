import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  batonTopology,
  connectNats,
  deploymentStreamNames,
  provision,
  Retention,
  Storage,
  tokenRevocationStream,
  watchdogSnapshotStream,
  type NatsHandle,
} from '@baton/eventstore';
import { ensureTokenKeyFile, TokenRevocationLog } from '@baton/platform';
import { createRedis, type RedisHandle } from '@baton/projections';
import { cleanupDeployment, STREAM_DELETE_ATTEMPTS } from './deployment';

/*
 * cleanupDeployment removes what a throwaway deployment leaves on the shared servers: every
 * stream a deployment may hold — the token revocation log among them, which a notifier with the
 * token key makes at its start (a `TS<hex>_TOKEN_REVOCATIONS` stream was once found left after a
 * CI run) — and its Redis keys. A delete that fails is asked again, and one that keeps failing is
 * an error naming the stream: a failure swallowed there is a stream that outlives the run. Real
 * NATS and Redis, a `ts` prefix of its own (the family of that stream); the failing deletes are
 * the real server's, with a fault put in front of the first ones.
 */

const prefix = `ts${randomBytes(5).toString('hex')}`;
let nats: NatsHandle;
let redis: RedisHandle;
let dir: string;

/** Make every stream a deployment may hold, each the way Baton makes it, and a few keys. */
async function makeDeployment(): Promise<void> {
  await provision(nats.jsm, batonTopology(prefix, { storage: Storage.memory }));
  const snapshots = watchdogSnapshotStream(prefix);
  await provision(nats.jsm, {
    streams: [{ ...snapshots, retention: Retention.limits, storage: Storage.memory, replicas: 1, duplicateWindowMs: 60_000 }],
  });
  const log = new TokenRevocationLog(nats, prefix, ensureTokenKeyFile(dir).key);
  await log.ensure();
  await log.record('0123456789abcdef', new Date().toISOString());
  await redis.client.set(`${prefix}:auth:tokens`, 'x');
  await redis.client.set(`${prefix}:proj:meta`, 'x');
}

/** The deployment's streams still on NATS. */
async function streamsLeft(): Promise<string[]> {
  const left: string[] = [];
  for (const name of deploymentStreamNames(prefix))
    if (
      await nats.jsm.streams.info(name).then(
        () => true,
        () => false,
      )
    )
      left.push(name);
  return left;
}

/** The handle, with each stream delete of `failing` refused `times` times before it reaches the server. */
function refusing(failing: string, times: number): Pick<NatsHandle, 'jsm'> {
  let refused = 0;
  const streams = Object.create(nats.jsm.streams) as NatsHandle['jsm']['streams'];
  streams.delete = async (name: string) => {
    if (name === failing && refused < times) {
      refused++;
      throw new Error(`TIMEOUT (refused before the server, ${refused})`);
    }
    return nats.jsm.streams.delete(name);
  };
  return { jsm: { ...nats.jsm, streams } as NatsHandle['jsm'] };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'baton-testing-cleanup-'));
  nats = await connectNats({ servers: process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222', reconnect: false });
  redis = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
  await redis.ping();
});

afterAll(async () => {
  for (const name of deploymentStreamNames(prefix)) await nats.jsm.streams.delete(name).catch(() => undefined);
  for (const key of await redis.client.keys(`${prefix}:*`)) await redis.client.unlink(key);
  await nats.drain();
  await redis.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('cleanupDeployment (real NATS and Redis)', () => {
  it('deletes every stream a deployment may hold, the token revocation log with them, and its keys', async () => {
    await makeDeployment();
    expect(await streamsLeft()).toEqual(deploymentStreamNames(prefix));
    expect(deploymentStreamNames(prefix)).toContain(`${prefix.toUpperCase()}_TOKEN_REVOCATIONS`);
    await cleanupDeployment(nats, redis.client, prefix);
    expect(await streamsLeft()).toEqual([]);
    expect(await redis.client.keys(`${prefix}:*`)).toEqual([]);
    // A deployment already gone: nothing to do, no error.
    await cleanupDeployment(nats, redis.client, prefix);
  });

  it('a delete that fails is asked again; one that keeps failing is an error naming the stream, after the rest is removed', async () => {
    const log = tokenRevocationStream(prefix).name;
    await makeDeployment();
    await cleanupDeployment(refusing(log, STREAM_DELETE_ATTEMPTS - 1), redis.client, prefix);
    expect(await streamsLeft()).toEqual([]);

    await makeDeployment();
    await expect(cleanupDeployment(refusing(log, STREAM_DELETE_ATTEMPTS), redis.client, prefix)).rejects.toThrow(
      new RegExp(`cleanup left 1 stream\\(s\\) of ${prefix} on NATS: ${log} \\(TIMEOUT`),
    );
    expect(await streamsLeft()).toEqual([log]);
    expect(await redis.client.keys(`${prefix}:*`)).toEqual([]);
  });
});
