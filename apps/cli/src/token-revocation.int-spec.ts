import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectNats, type NatsHandle } from '@baton/eventstore';
import { ApiTokenKeys, ApiTokenStore, ensureTokenKeyFile, TokenRevocationLog, tokenRevocationStreamName, type TokenKey } from '@baton/platform';
import { createRedis, type RedisHandle } from '@baton/projections';
// eslint-disable-next-line @nx/enforce-module-boundaries -- test-only helper, by path as libs/eventstore/src/int/servers is
import { cleanupDeployment } from '../../../libs/testing/src/deployment';
import { main } from './main';
import { bufferedIo } from './output';

/*
 * `baton token revoke` appends the revocation to the deployment's token revocation log (JetStream)
 * before it marks the record in Redis: a signed record from before the revocation, put back into
 * Redis, no longer authenticates. A log that cannot be written is exit 1
 * `token_revocation_unrecorded`, and Redis is left as it was. `sign-existing` records in the log the
 * revocations only Redis holds. Real NATS and Redis, a random prefix.
 */

const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const prefix = `tkr${randomBytes(5).toString('hex')}`;
let redis: RedisHandle;
let nats: NatsHandle;
let dir: string;
let key: TokenKey;

async function baton(env: Record<string, string>, ...argv: string[]) {
  const io = bufferedIo();
  const code = await main(argv, {
    io,
    env: { BATON_PREFIX: prefix, USER: 'ada', BATON_NATS_DIR: join(dir, 'no-deployment'), REDIS_URL, NATS_URL, BATON_TOKEN_KEY_FILE: key.file, ...env },
  });
  return { code, out: io.out(), err: io.err() };
}
const raw = async (id: string) => (await redis.client.get(ApiTokenKeys.token(prefix, id)))!;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'baton-token-revocation-'));
  key = ensureTokenKeyFile(join(dir, 'deployment')).key;
  redis = createRedis(REDIS_URL);
  await redis.ping();
  nats = await connectNats({ servers: NATS_URL, reconnect: false });
});

afterAll(async () => {
  // This prefix's keys and streams (the revocation log); a stream left is an error.
  try {
    await cleanupDeployment(nats, redis.client, prefix);
  } finally {
    await nats.drain();
    await redis.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

describe('baton token revoke records the revocation where Redis cannot take it back (real NATS and Redis)', () => {
  it('revoke appends to the revocation log: the record from before it, put back, is refused (revocation_rolled_back)', async () => {
    const made = await baton({}, 'token', 'create', '--role', 'admin', '--name', 'rolf', '--json');
    expect(made.code).toBe(0);
    const { token_id } = JSON.parse(made.out) as { token_id: string };
    const before = await raw(token_id);
    expect(await baton({}, 'token', 'revoke', token_id)).toMatchObject({ code: 0, out: `revoked ${token_id}\n` });
    await redis.client.set(ApiTokenKeys.token(prefix, token_id), before);
    const notifierView = new ApiTokenStore(redis.client, prefix, key, new TokenRevocationLog(nats, prefix, key));
    expect(await notifierView.valid(token_id, Date.now())).toEqual({ ok: false, reason: 'revocation_rolled_back', tokenId: token_id });
  });

  it('NATS unreachable (exit 69) or a log that cannot be written (exit 1 token_revocation_unrecorded), and the record in Redis is left as it was', async () => {
    const made = await baton({}, 'token', 'create', '--role', 'viewer', '--project', 'demo', '--name', 'dora', '--json');
    const { token_id } = JSON.parse(made.out) as { token_id: string };
    const before = await raw(token_id);
    // NATS that accepts no JetStream request in time: a port nothing listens on.
    const refused = await baton({ NATS_URL: 'nats://127.0.0.1:1' }, 'token', 'revoke', token_id, '--json');
    expect({ code: refused.code, error: (JSON.parse(refused.err) as { error: { code: string } }).error.code }).toEqual({ code: 69, error: 'unavailable' });
    expect(await raw(token_id)).toBe(before);

    // NATS answers, the log does not take the entry (a sealed stream: neither updated nor appended to).
    await new TokenRevocationLog(nats, prefix, key).ensure();
    const info = await nats.jsm.streams.info(tokenRevocationStreamName(prefix));
    await nats.jsm.streams.update(tokenRevocationStreamName(prefix), { ...info.config, sealed: true } as Parameters<typeof nats.jsm.streams.update>[1]);
    const unrecorded = await baton({}, 'token', 'revoke', token_id, '--json');
    expect({ code: unrecorded.code, error: (JSON.parse(unrecorded.err) as { error: { code: string } }).error.code }).toEqual({
      code: 1,
      error: 'token_revocation_unrecorded',
    });
    expect(await raw(token_id)).toBe(before);
    await nats.jsm.streams.delete(tokenRevocationStreamName(prefix));
  });

  it('sign-existing records in the log the revocations only Redis holds (made before the log)', async () => {
    const keyOnly = new ApiTokenStore(redis.client, prefix, key);
    const made = await keyOnly.create({ name: 'otto', role: 'viewer', projects: ['demo'], now: new Date().toISOString() });
    const before = await raw(made.info.token_id);
    await keyOnly.revoke(made.info.token_id, new Date().toISOString());
    const signed = await baton({}, 'token', 'sign-existing', '--json');
    expect(signed.code).toBe(0);
    expect((JSON.parse(signed.out) as { revocations_recorded: string[] }).revocations_recorded).toContain(made.info.token_id);
    await redis.client.set(ApiTokenKeys.token(prefix, made.info.token_id), before);
    const notifierView = new ApiTokenStore(redis.client, prefix, key, new TokenRevocationLog(nats, prefix, key));
    expect(await notifierView.valid(made.info.token_id, Date.now())).toMatchObject({ ok: false, reason: 'revocation_rolled_back' });
  });
});
