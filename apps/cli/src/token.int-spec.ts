import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectNats } from '@baton/eventstore';
import { createRedis, type RedisHandle } from '@baton/projections';
import {
  ApiTokenKeys,
  ApiTokenStore,
  apiTokenExpired,
  ensureTokenKeyFile,
  parseApiToken,
  tokenSecretMatches,
  type ApiTokenRecord,
  type TokenKey,
} from '@baton/platform';
// eslint-disable-next-line @nx/enforce-module-boundaries -- test-only helper, by path as libs/eventstore/src/int/servers is
import { cleanupDeployment } from '../../../libs/testing/src/deployment';
import { main } from './main';
import { bufferedIo } from './output';

/*
 * Issue 14: `baton token create --expires-in / --expires-at` gives a token an expiry, written in
 * the record the notifier verifies (`expires_at`); `baton token list` shows it and marks expired
 * tokens. Real Redis, a random prefix; the deployment's token key in a folder of the test's own
 * (the CLI signs every record with it: token-signing.int-spec.ts).
 */

const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const prefix = `tk${randomBytes(5).toString('hex')}`;
let redis: RedisHandle;
let keyDir: string;
let key: TokenKey;

async function baton(...argv: string[]) {
  const io = bufferedIo();
  const code = await main(argv, { io, env: { REDIS_URL, BATON_PREFIX: prefix, BATON_OPERATOR: 'ada', USER: 'ada', BATON_TOKEN_KEY_FILE: key.file } });
  return { code, out: io.out(), err: io.err() };
}

async function record(tokenId: string): Promise<ApiTokenRecord> {
  return JSON.parse((await redis.client.get(ApiTokenKeys.token(prefix, tokenId)))!) as ApiTokenRecord;
}

describe('baton token: expiry at creation, shown in the list (real Redis)', () => {
  beforeAll(async () => {
    keyDir = mkdtempSync(join(tmpdir(), 'baton-token-'));
    key = ensureTokenKeyFile(keyDir).key;
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
      rmSync(keyDir, { recursive: true, force: true });
    }
  });

  it('create --expires-in 30d / --expires-at write expires_at; list shows it, and marks an expired token', async () => {
    const before = Date.now();
    const month = await baton('token', 'create', '--role', 'operator', '--project', 'alpha', '--name', 'olga', '--expires-in', '30d', '--json');
    expect(month.code).toBe(0);
    const made = JSON.parse(month.out) as { token: string; token_id: string; expires_at: string };
    const expires = Date.parse(made.expires_at);
    expect(expires).toBeGreaterThanOrEqual(before + 30 * 86_400_000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 30 * 86_400_000);
    expect((await record(made.token_id)).expires_at).toBe(made.expires_at);

    const at = await baton('token', 'create', '--role', 'viewer', '--project', 'alpha', '--name', 'vera', '--expires-at', '2099-01-31T18:00:00Z', '--json');
    expect(JSON.parse(at.out)).toMatchObject({ expires_at: '2099-01-31T18:00:00.000Z' });
    const forever = await baton('token', 'create', '--role', 'viewer', '--project', 'alpha', '--name', 'nell', '--json');
    expect(JSON.parse(forever.out)).toMatchObject({ expires_at: null });
    const brief = JSON.parse(
      (await baton('token', 'create', '--role', 'viewer', '--project', 'alpha', '--name', 'bria', '--expires-in', '1s', '--json')).out,
    ) as { token_id: string };
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect(apiTokenExpired(await record(brief.token_id), Date.now())).toBe(true);

    const listed = JSON.parse((await baton('token', 'list', '--json')).out) as Array<{ name: string; expires_at: string | null; expired: boolean }>;
    expect(listed.map(({ name, expires_at, expired }) => ({ name, expires_at, expired }))).toEqual([
      { name: 'olga', expires_at: made.expires_at, expired: false },
      { name: 'vera', expires_at: '2099-01-31T18:00:00.000Z', expired: false },
      { name: 'nell', expires_at: null, expired: false },
      { name: 'bria', expires_at: expect.any(String), expired: true },
    ]);
    const table = (await baton('token', 'list')).out;
    expect(table).toMatch(/EXPIRES/);
    expect(table).toContain(made.expires_at);
    expect(table).toMatch(/nell .*never/);
    expect(table).toMatch(/bria .*\(expired\)/);
  });

  it('a malformed, past or doubled expiry, --project with --all-projects, or an admin token with --project, is a usage error (exit 2) and makes no token', async () => {
    const count = async () => (await redis.client.smembers(ApiTokenKeys.tokens(prefix))).length;
    const before = await count();
    for (const args of [
      ['--expires-in', '30'],
      ['--expires-in', '1.5d'],
      ['--expires-in', '0d'],
      ['--expires-at', 'tomorrow'],
      ['--expires-at', '2001-01-01T00:00:00Z'],
      ['--expires-in', '1d', '--expires-at', '2099-01-01T00:00:00Z'],
      // One scope or the other: --project with --all-projects would silently grant every project.
      ['--all-projects'],
    ]) {
      const made = await baton('token', 'create', '--role', 'viewer', '--project', 'alpha', ...args);
      expect({ args, code: made.code }).toEqual({ args, code: 2 });
    }
    // An admin acts on every project: a --project would read as a limit it does not have.
    const admin = await baton('token', 'create', '--role', 'admin', '--project', 'alpha');
    expect(admin.code).toBe(2);
    expect(admin.err).toMatch(/admin token acts on every project/);
    expect(await count()).toBe(before);
  });

  it('a CLI-made token is valid in the store the notifier verifies with; revoke ends it; a bad name or project makes none', async () => {
    const store = new ApiTokenStore(redis.client, prefix, key);
    const made = JSON.parse((await baton('token', 'create', '--role', 'operator', '--project', 'beta,beta', '--name', 'ola', '--json')).out) as {
      token: string;
      token_id: string;
    };
    const parts = parseApiToken(made.token)!;
    const found = await store.valid(parts.tokenId, Date.now());
    if (!found.ok) throw new Error(`the CLI's token is not valid: ${found.reason}`);
    expect(found.record).toMatchObject({ name: 'ola', role: 'operator', projects: ['beta'], created_by: 'ada', revoked_at: null });
    expect(tokenSecretMatches(found.record.salt, parts.secret, found.record.hash)).toBe(true);

    expect(await baton('token', 'revoke', made.token_id)).toMatchObject({ code: 0, out: `revoked ${made.token_id}\n` });
    expect(await store.valid(parts.tokenId, Date.now())).toEqual({ ok: false, reason: 'revoked', tokenId: parts.tokenId });
    const unknown = await baton('token', 'revoke', '0123456789abcdef');
    expect(unknown.code).not.toBe(0);
    expect(unknown.err).toContain('no token 0123456789abcdef');
    expect(JSON.parse((await baton('token', 'revoke', '0123456789abcdef', '--json')).err)).toMatchObject({ error: { code: 'not_found' } });
  });

  it('revoke --json prints JSON; revoking a revoked token again changes nothing and says so (already_revoked, with the first revocation time)', async () => {
    const made = JSON.parse((await baton('token', 'create', '--role', 'viewer', '--project', 'alpha', '--name', 'vic', '--json')).out) as { token_id: string };
    const first = await baton('token', 'revoke', made.token_id, '--json');
    expect(first.code).toBe(0);
    const revoked = JSON.parse(first.out) as { revoked_at: string };
    expect(revoked).toEqual({ token_id: made.token_id, name: 'vic', revoked_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/), already_revoked: false });
    const again = await baton('token', 'revoke', made.token_id, '--json');
    expect(again.code).toBe(0);
    expect(JSON.parse(again.out)).toEqual({ token_id: made.token_id, name: 'vic', revoked_at: revoked.revoked_at, already_revoked: true });
    expect(await baton('token', 'revoke', made.token_id)).toMatchObject({
      code: 0,
      out: `${made.token_id} was already revoked at ${revoked.revoked_at}; nothing changed\n`,
    });

    const count = async () => (await redis.client.smembers(ApiTokenKeys.tokens(prefix))).length;
    const before = await count();
    for (const args of [
      ['--name', 'has space'],
      ['--name', 'x'.repeat(129)],
      ['--project', 'Upper'],
    ]) {
      const refused = await baton('token', 'create', '--role', 'viewer', '--project', 'alpha', ...args);
      expect({ args, code: refused.code }).toEqual({ args, code: 2 });
    }
    expect(await count()).toBe(before);
  });

  it("--name is who acted: a name Baton's own actors use is a usage error (exit 2, token_name_reserved); an active token's name is token_name_taken (exit 1) unless --rotate, which revokes it", async () => {
    const count = async () => (await redis.client.smembers(ApiTokenKeys.tokens(prefix))).length;
    const before = await count();
    for (const name of ['baton-router', 'system', 'admin', 'project-client']) {
      const refused = await baton('token', 'create', '--role', 'operator', '--project', 'ops', '--name', name, '--json');
      expect({ name, code: refused.code, error: (JSON.parse(refused.err) as { error: unknown }).error }).toEqual({
        name,
        code: 2,
        error: expect.objectContaining({ code: 'token_name_reserved', details: { name } }),
      });
    }
    expect(await count()).toBe(before);

    const first = JSON.parse((await baton('token', 'create', '--role', 'operator', '--project', 'ops', '--name', 'otto', '--json')).out) as {
      token_id: string;
      rotated: string[];
    };
    expect(first.rotated).toEqual([]);
    const second = await baton('token', 'create', '--role', 'operator', '--project', 'ops', '--name', 'otto', '--json');
    expect(second.code).toBe(1);
    expect(JSON.parse(second.err)).toMatchObject({ error: { code: 'token_name_taken', details: { name: 'otto', token_ids: [first.token_id] } } });
    const prose = await baton('token', 'create', '--role', 'operator', '--project', 'ops', '--name', 'otto');
    expect(prose.code).toBe(1);
    expect(prose.err).toContain('--rotate');
    expect(await count()).toBe(before + 1);

    const rotated = await baton('token', 'create', '--role', 'operator', '--project', 'ops', '--name', 'otto', '--rotate', '--json');
    expect(rotated.code).toBe(0);
    const made = JSON.parse(rotated.out) as { token_id: string; rotated: string[] };
    expect(made.rotated).toEqual([first.token_id]);
    expect((await record(first.token_id)).revoked_at).toEqual(expect.any(String));
    expect((await record(made.token_id)).revoked_at).toBeNull();
  });

  it('list warns of active tokens sharing a name (made before names were checked): token_name_shared naming them; none once all but one are revoked', async () => {
    const made = JSON.parse((await baton('token', 'create', '--role', 'operator', '--project', 'ops', '--name', 'Grace', '--json')).out) as {
      token_id: string;
    };
    // A second "grace" as a Baton before the name check stored it: the record and the set, nothing else.
    const twinId = 'abcdef0123456789';
    await redis.client
      .multi()
      .set(ApiTokenKeys.token(prefix, twinId), JSON.stringify({ ...(await record(made.token_id)), token_id: twinId, name: 'grace' }))
      .sadd(ApiTokenKeys.tokens(prefix), twinId)
      .exec();

    const prose = await baton('token', 'list');
    expect(prose.code).toBe(0);
    expect(prose.err).toContain(`baton: warning: active tokens `);
    // Both spellings named (the two records share their creation time: their order is by id).
    expect(prose.err).toMatch(/share the name (Grace \/ grace|grace \/ Grace):/);
    const json = await baton('token', 'list', '--json');
    expect(json.code).toBe(0);
    const { warnings } = JSON.parse(json.err) as { warnings: Array<{ code: string; details: { name: string; token_ids: string[] } }> };
    const shared = warnings.filter((w) => w.code === 'token_name_shared');
    expect(shared).toHaveLength(1);
    expect(shared[0]?.details.token_ids.sort()).toEqual([made.token_id, twinId].sort());

    expect((await baton('token', 'revoke', twinId)).code).toBe(0);
    const after = await baton('token', 'list');
    expect(after.code).toBe(0);
    expect(after.err).not.toContain('share the name');
  });

  it('each subcommand takes its own options only: revoke --dry-run, create --dry-run, list --rotate are usage errors (exit 2) that change nothing', async () => {
    const store = new ApiTokenStore(redis.client, prefix, key);
    const made = JSON.parse((await baton('token', 'create', '--role', 'viewer', '--project', 'beta', '--name', 'dry', '--json')).out) as { token_id: string };
    const dryRevoke = await baton('token', 'revoke', made.token_id, '--dry-run', '--json');
    expect(dryRevoke.code).toBe(2);
    expect(JSON.parse(dryRevoke.err)).toMatchObject({
      error: { code: 'usage', message: expect.stringContaining('unknown option --dry-run (this command takes --json') },
    });
    expect(await store.valid(made.token_id, Date.now())).toMatchObject({ ok: true });
    const before = (await redis.client.smembers(ApiTokenKeys.tokens(prefix))).length;
    expect((await baton('token', 'create', '--role', 'viewer', '--project', 'beta', '--name', 'dry2', '--dry-run')).code).toBe(2);
    expect((await redis.client.smembers(ApiTokenKeys.tokens(prefix))).length).toBe(before);
    expect((await baton('token', 'list', '--rotate')).code).toBe(2);
    expect((await baton('token', 'sign-existing', '--role', 'viewer')).code).toBe(2);
    expect((await baton('token', 'list', 'extra')).code).toBe(2);
  });

  it('revoke of a malformed token id is a usage error (exit 2), not not_found', async () => {
    const malformed = await baton('token', 'revoke', 'nothex', '--json');
    expect(malformed.code).toBe(2);
    expect(JSON.parse(malformed.err)).toMatchObject({ error: { code: 'usage', details: { token_id: 'nothex' } } });
    expect((await baton('token', 'revoke', '0123456789ABCDEF')).code).toBe(2);
  });
});
