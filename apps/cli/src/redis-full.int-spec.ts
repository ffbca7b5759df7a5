import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiTokenKeys, ensureTokenKeyFile, type TokenKey } from '@baton/platform';
import { createRedis, type RedisHandle } from '@baton/projections';
// eslint-disable-next-line @nx/enforce-module-boundaries -- test-only helper, by path as the other CLI specs take it
import { startRedisServer, type PrivateServer } from '../../../libs/eventstore/src/int/servers';
import { main } from './main';
import { bufferedIo } from './output';

/*
 * A full Redis (maxmemory reached under noeviction) refuses every write and still answers reads.
 * A CLI command whose write it refuses fails with the code `redis_full` (exit 1) and says what to
 * do, instead of Redis's own "OOM command not allowed…" line under `failed`; a read (`token list`)
 * still answers. A private redis-server on a free loopback port, its maxmemory set from the test.
 */

describe('baton on a full Redis: redis_full, not the OOM reply (private redis-server)', () => {
  const prefix = `rf${randomBytes(4).toString('hex')}`;
  let server: PrivateServer;
  let redis: RedisHandle;
  let keyDir: string;
  let key: TokenKey;

  const baton = async (...argv: string[]) => {
    const io = bufferedIo();
    const code = await main(argv, { io, env: { REDIS_URL: server.url, BATON_PREFIX: prefix, USER: 'ada', BATON_TOKEN_KEY_FILE: key.file } });
    return { code, out: io.out(), err: io.err() };
  };

  beforeAll(async () => {
    server = await startRedisServer({ args: ['--maxmemory-policy', 'noeviction'] });
    redis = createRedis(server.url);
    keyDir = mkdtempSync(join(tmpdir(), 'baton-redis-full-'));
    key = ensureTokenKeyFile(keyDir).key;
  });

  afterAll(async () => {
    await redis?.close();
    await server?.remove();
    if (keyDir !== undefined) rmSync(keyDir, { recursive: true, force: true });
  });

  it('token create on a full Redis: redis_full with what to do (--json and prose), nothing written; list still answers; with room made the same command works', async () => {
    const first = await baton('token', 'create', '--role', 'viewer', '--project', 'alpha', '--name', 'vera', '--json');
    expect(first.code).toBe(0);
    const tokens = ApiTokenKeys.tokens(prefix);
    expect(await redis.client.scard(tokens)).toBe(1);

    // Full: any used memory is over a maxmemory of 1 byte.
    await redis.client.config('SET', 'maxmemory', '1');
    const refused = await baton('token', 'create', '--role', 'operator', '--project', 'alpha', '--name', 'olga', '--json');
    expect(refused.code).toBe(1);
    expect(refused.out).toBe('');
    const failure = (JSON.parse(refused.err) as { error: { code: string; message: string } }).error;
    expect(failure.code).toBe('redis_full');
    expect(failure.message).toContain('Redis is full');
    expect(failure.message).toContain('maxmemory');
    expect(failure.message).not.toMatch(/OOM command not allowed/);
    const prose = await baton('token', 'create', '--role', 'operator', '--project', 'alpha', '--name', 'olga');
    expect(prose.code).toBe(1);
    expect(prose.err).toMatch(/^baton token: Redis is full \(its maxmemory reached under noeviction\)/);
    expect(await redis.client.scard(tokens)).toBe(1);

    const listed = await baton('token', 'list', '--json');
    expect(listed.code).toBe(0);
    expect(listed.out).toContain('vera');

    await redis.client.config('SET', 'maxmemory', '0');
    const again = await baton('token', 'create', '--role', 'operator', '--project', 'alpha', '--name', 'olga', '--json');
    expect(again.code).toBe(0);
    expect(await redis.client.scard(tokens)).toBe(2);
  });
});
