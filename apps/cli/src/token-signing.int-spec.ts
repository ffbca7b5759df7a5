import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiTokenKeys, ApiTokenStore, ensureTokenKeyFile, readTokenKey, type ApiTokenRecord, type TokenKey } from '@baton/platform';
import { connectNats } from '@baton/eventstore';
import { createRedis, type RedisHandle } from '@baton/projections';
// eslint-disable-next-line @nx/enforce-module-boundaries -- test-only helper, by path as libs/eventstore/src/int/servers is
import { cleanupDeployment } from '../../../libs/testing/src/deployment';
import { main } from './main';
import { bufferedIo } from './output';

/*
 * Security audit finding 3 and D3. `baton token create / revoke / sign-existing` sign token records
 * with the deployment's token key (BATON_TOKEN_KEY_FILE, else the one npm start's local.json names):
 * without one they refuse, typed, and write nothing — run with an agent's NATS credentials and
 * REDIS_URL, as the audit did, `token create --role admin` no longer makes a token. With NATS_URL
 * set and REDIS_URL not, the CLI no longer reaches 127.0.0.1:6379 silently: reads warn
 * `default_server_read`, token writes are refused `default_server_write`. `token sign-existing` is
 * the upgrade of a deployment whose tokens predate its key. Real Redis, a random prefix.
 */

const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const DEFAULT_REDIS = 'redis://127.0.0.1:6379';
const prefix = `tks${randomBytes(5).toString('hex')}`;
let redis: RedisHandle;
let dir: string;
let key: TokenKey;

type Failure = { error: { code: string; message: string; details?: Record<string, unknown> } };

async function baton(env: Record<string, string>, ...argv: string[]) {
  const io = bufferedIo();
  const code = await main(argv, { io, env: { BATON_PREFIX: prefix, USER: 'ada', BATON_NATS_DIR: join(dir, 'no-deployment'), ...env } });
  return { code, out: io.out(), err: io.err() };
}
const tokenCount = async () => redis.client.scard(ApiTokenKeys.tokens(prefix));
const record = async (id: string) => JSON.parse((await redis.client.get(ApiTokenKeys.token(prefix, id)))!) as ApiTokenRecord;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'baton-token-signing-'));
  key = ensureTokenKeyFile(join(dir, 'deployment')).key;
  redis = createRedis(REDIS_URL);
  await redis.ping();
});

afterAll(async () => {
  // This prefix's keys and streams (the revocation log revoke made); a stream left is an error.
  const nc = await connectNats({ servers: process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222', reconnect: false });
  try {
    await cleanupDeployment(nc, redis.client, prefix);
  } finally {
    await nc.drain();
    await redis.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

describe('baton token signs with the deployment token key (real Redis)', () => {
  it('create, revoke and sign-existing without a key are refused token_key_missing (exit 2), naming BATON_TOKEN_KEY_FILE, and write nothing', async () => {
    const before = await tokenCount();
    for (const argv of [
      ['token', 'create', '--role', 'admin', '--name', 'mallory', '--json'],
      ['token', 'revoke', '0123456789abcdef', '--json'],
      ['token', 'sign-existing', '--json'],
    ]) {
      const refused = await baton({ REDIS_URL }, ...argv);
      expect({ argv, code: refused.code, error: (JSON.parse(refused.err) as Failure).error }).toEqual({
        argv,
        code: 2,
        error: expect.objectContaining({ code: 'token_key_missing', details: { setting: 'BATON_TOKEN_KEY_FILE' } }),
      });
    }
    const prose = await baton({ REDIS_URL }, 'token', 'create', '--role', 'admin', '--name', 'mallory');
    expect(prose.code).toBe(2);
    expect(prose.out).toBe('');
    expect(prose.err).toContain("token create signs token records with the deployment's token key, and none is named: set BATON_TOKEN_KEY_FILE");
    expect(await tokenCount()).toBe(before);

    // Named, and not readable (or too short): token_key_unreadable, the file named.
    const absent = join(dir, 'absent.key');
    const unreadable = await baton({ REDIS_URL, BATON_TOKEN_KEY_FILE: absent }, 'token', 'create', '--role', 'admin', '--name', 'mallory', '--json');
    expect({ code: unreadable.code, error: (JSON.parse(unreadable.err) as Failure).error }).toEqual({
      code: 2,
      error: expect.objectContaining({
        code: 'token_key_unreadable',
        details: { file: absent, from: 'BATON_TOKEN_KEY_FILE', reason: 'unreadable' },
      }),
    });
    writeFileSync(join(dir, 'short.key'), 'short\n');
    const short = await baton({ REDIS_URL, BATON_TOKEN_KEY_FILE: join(dir, 'short.key') }, 'token', 'create', '--role', 'admin', '--name', 'mallory', '--json');
    expect((JSON.parse(short.err) as Failure).error).toMatchObject({ code: 'token_key_unreadable', details: { reason: 'invalid' } });
    expect(await tokenCount()).toBe(before);
  });

  it('with the key, the record is signed with it; npm start’s local.json names the key when BATON_TOKEN_KEY_FILE does not', async () => {
    const made = await baton(
      { REDIS_URL, BATON_TOKEN_KEY_FILE: key.file },
      'token',
      'create',
      '--role',
      'operator',
      '--project',
      'alpha',
      '--name',
      'olga',
      '--json',
    );
    expect(made.code).toBe(0);
    const { token_id } = JSON.parse(made.out) as { token_id: string };
    expect(await new ApiTokenStore(redis.client, prefix, key).valid(token_id, Date.now())).toMatchObject({ ok: true });

    // The platform npm start runs: local.json names the Redis and the key (NATS_URL and REDIS_URL unset).
    const local = join(dir, 'local-deployment');
    const localKey = ensureTokenKeyFile(local).key;
    writeFileSync(
      join(local, 'local.json'),
      JSON.stringify({ url: 'nats://127.0.0.1:4222', creds: { admin: join(local, 'creds', 'admin.creds') }, redis: REDIS_URL, token_key: localKey.file }),
    );
    const viaLocal = await baton({ BATON_NATS_DIR: local }, 'token', 'create', '--role', 'viewer', '--project', 'alpha', '--name', 'lou', '--json');
    expect(viaLocal.code).toBe(0);
    const lou = (JSON.parse(viaLocal.out) as { token_id: string }).token_id;
    expect(await new ApiTokenStore(redis.client, prefix, localKey).valid(lou, Date.now())).toMatchObject({ ok: true });
    expect(await new ApiTokenStore(redis.client, prefix, key).valid(lou, Date.now())).toMatchObject({ ok: false, reason: 'signature_mismatch' });
  });

  it('sign-existing: tokens made before the key are listed unsigned, signed as they stand (dry-run first), an altered one reported and left', async () => {
    const env = { REDIS_URL, BATON_TOKEN_KEY_FILE: key.file };
    // Records as an earlier Baton (no key) wrote them, and one signed and then altered in Redis.
    const legacy = new ApiTokenStore(redis.client, prefix);
    const old = await legacy.create({ name: 'old-otto', role: 'operator', projects: ['ops'], now: '2026-01-01T00:00:00.000Z' });
    const tampered = await new ApiTokenStore(redis.client, prefix, key).create({
      name: 'tam',
      role: 'viewer',
      projects: ['ops'],
      now: '2026-01-01T00:00:01.000Z',
    });
    await redis.client.set(ApiTokenKeys.token(prefix, tampered.info.token_id), JSON.stringify({ ...(await record(tampered.info.token_id)), role: 'admin' }));

    const signatures = async (given: Record<string, string>) =>
      Object.fromEntries(
        (JSON.parse((await baton(given, 'token', 'list', '--json')).out) as Array<{ token_id: string; signature: string }>).map((r) => [
          r.token_id,
          r.signature,
        ]),
      );
    expect(await signatures(env)).toMatchObject({ [old.info.token_id]: 'unsigned', [tampered.info.token_id]: 'mismatch' });
    // Without a key, list reads (no signing) and cannot tell.
    expect(await signatures({ REDIS_URL })).toMatchObject({ [old.info.token_id]: 'unchecked' });

    const dry = await baton(env, 'token', 'sign-existing', '--dry-run', '--json');
    expect(dry.code).toBe(0);
    const planned = JSON.parse(dry.out) as { signed: Array<{ token_id: string }>; dry_run: boolean };
    expect(planned.dry_run).toBe(true);
    expect(planned.signed.map((r) => r.token_id)).toContain(old.info.token_id);
    expect((await record(old.info.token_id)).mac).toBeUndefined();

    const done = await baton(env, 'token', 'sign-existing', '--json');
    expect(done.code).toBe(0);
    const result = JSON.parse(done.out) as {
      signed: Array<{ token_id: string }>;
      mismatched: Array<{ token_id: string }>;
      changed: string[];
      dry_run: boolean;
    };
    expect(result.signed.map((r) => r.token_id)).toContain(old.info.token_id);
    // (lou's record, signed with the other key above, does not verify with this one either.)
    expect(result.mismatched.map((r) => r.token_id)).toContain(tampered.info.token_id);
    expect(result.mismatched.map((r) => r.token_id)).not.toContain(old.info.token_id);
    expect(result).toMatchObject({ changed: [], dry_run: false });
    expect(await signatures(env)).toMatchObject({ [old.info.token_id]: 'valid', [tampered.info.token_id]: 'mismatch' });

    const prose = await baton(env, 'token', 'sign-existing');
    expect(prose.out).toContain('signed 0 token record(s)');
    expect(prose.out).toContain(`${tampered.info.token_id} tam (admin, ops`);
    expect(prose.out).toContain('revoke them');
  });

  it('baton nats-config makes the token key beside the admin credentials (0600), once', async () => {
    const folder = join(dir, 'nats-config');
    const first = await baton({}, 'nats-config', '--dir', folder, '--json');
    expect(first.code).toBe(0);
    const { token_key } = JSON.parse(first.out) as { token_key: string };
    expect(token_key).toBe(join(folder, 'token.key'));
    expect(statSync(token_key).mode & 0o777).toBe(0o600);
    const again = JSON.parse((await baton({}, 'nats-config', '--dir', folder, '--json')).out) as { token_key: string };
    expect(readTokenKey(again.token_key).secret.equals(readTokenKey(token_key).secret)).toBe(true);
  });
});

describe('NATS_URL set and REDIS_URL not (D3): the CLI does not reach 127.0.0.1:6379 silently', () => {
  it('token create is refused default_server_write (exit 2) naming REDIS_URL, and writes nothing — the key and NATS named', async () => {
    // The Redis the default names (on this machine, the shared one — or none).
    const atDefault = createRedis(DEFAULT_REDIS, { maxRetriesPerRequest: 0, retryStrategy: () => null });
    try {
      const count = async () => atDefault.client.scard(ApiTokenKeys.tokens(prefix)).catch(() => 0);
      const was = await count();
      const refused = await baton(
        { NATS_URL: 'nats://127.0.0.1:4222', BATON_TOKEN_KEY_FILE: key.file },
        'token',
        'create',
        '--role',
        'admin',
        '--name',
        'mallory',
        '--json',
      );
      expect({ code: refused.code, error: (JSON.parse(refused.err) as Failure).error }).toEqual({
        code: 2,
        error: {
          code: 'default_server_write',
          issues: [],
          message: expect.stringContaining(
            'token create writes to Redis and would write to redis://127.0.0.1:6379, the default: NATS_URL is set (so no local.json is read) and REDIS_URL is not',
          ),
          details: { server: 'redis', url: DEFAULT_REDIS, setting: 'REDIS_URL', nats_url: 'nats://127.0.0.1:4222' },
        },
      });
      expect((JSON.parse(refused.err) as Failure).error.message).toContain("Set REDIS_URL to the deployment's Redis");
      expect(await count()).toBe(was);
      // REDIS_URL set: the same command writes.
      const given = await baton(
        { NATS_URL: 'nats://127.0.0.1:4222', REDIS_URL, BATON_TOKEN_KEY_FILE: key.file },
        'token',
        'create',
        '--role',
        'viewer',
        '--project',
        'alpha',
        '--name',
        'vi',
        '--json',
      );
      expect(given.code).toBe(0);
    } finally {
      await atDefault.close();
    }
  });

  it('inbox reads Redis at the default with a warning default_server_read that says why and what to set; REDIS_URL set: none', async () => {
    const env = { NATS_URL: 'nats://127.0.0.1:4222', BATON_PROJECTION_PREFIX: `${prefix}:proj` };
    const read = await baton(env, 'inbox', '--json');
    const stderr = JSON.parse(read.err.trim().split('\n').pop()!) as { warnings?: unknown[]; error?: { details?: { warnings?: unknown[] } } };
    const warnings = (stderr.warnings ?? stderr.error?.details?.warnings ?? []) as Array<{ code: string; message: string; details: unknown }>;
    expect(warnings[0]).toEqual({
      code: 'default_server_read',
      message: expect.stringContaining(
        "reading Redis at redis://127.0.0.1:6379, the default: NATS_URL is set (so no local.json is read) and REDIS_URL is not, so this may be another deployment's server",
      ),
      details: { server: 'redis', url: DEFAULT_REDIS, setting: 'REDIS_URL', nats_url: 'nats://127.0.0.1:4222' },
    });
    const given = await baton({ ...env, REDIS_URL }, 'inbox', '--json');
    expect(given.err).not.toContain('default_server_read');
  });
});
