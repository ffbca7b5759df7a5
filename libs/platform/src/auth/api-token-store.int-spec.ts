import { randomBytes } from 'node:crypto';
import { createRedis, type RedisHandle } from '@baton/projections';
import { ApiTokenKeys, parseApiToken } from './api-token';
import { ApiTokenInputError, ApiTokenNameError, ApiTokenStore, RESERVED_TOKEN_NAMES } from './api-token-store';

/*
 * The one store of operator API tokens (the CLI's `baton token` and the notifier use it): what it
 * writes, what it accepts back, and what it refuses. Real Redis, a random prefix.
 */

const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const prefix = `ats${randomBytes(5).toString('hex')}`;
const now = '2026-12-01T10:00:00.000Z';
let redis: RedisHandle;
let store: ApiTokenStore;

beforeAll(async () => {
  redis = createRedis(REDIS_URL);
  await redis.ping();
  store = new ApiTokenStore(redis.client, prefix);
});

afterAll(async () => {
  for await (const batch of redis.client.scanStream({ match: `${prefix}:*`, count: 500 })) {
    const keys = batch as string[];
    if (keys.length > 0) await redis.client.unlink(...keys);
  }
  await redis.close();
});

describe('ApiTokenStore (real Redis)', () => {
  it('creates a record with a salted hash only, lists it without them, and an admin always gets every project', async () => {
    const { token, info } = await store.create({ name: 'ada', role: 'admin', projects: ['alpha'], createdBy: 'root', now });
    const parts = parseApiToken(token)!;
    expect(info).toEqual({ token_id: parts.tokenId, name: 'ada', role: 'admin', projects: '*', created_at: now, created_by: 'root', revoked_at: null });
    const raw = (await redis.client.get(ApiTokenKeys.token(prefix, parts.tokenId)))!;
    expect(raw).not.toContain(parts.secret);
    expect(await store.list()).toEqual([info]);
    expect((await store.valid(parts.tokenId, Date.parse(now))).ok).toBe(true);
  });

  it('refuses a record outside the token set, a record that does not parse, a revoked and an expired token', async () => {
    const made = await store.create({ name: 'bo', role: 'viewer', projects: ['alpha'], now, expiresAt: '2026-12-02T10:00:00Z' });
    const id = made.info.token_id;
    expect(made.info.expires_at).toBe('2026-12-02T10:00:00.000Z');
    expect(await store.valid(id, Date.parse('2026-12-02T10:00:00Z'))).toEqual({ ok: false, reason: 'expired', tokenId: id });

    await redis.client.srem(ApiTokenKeys.tokens(prefix), id);
    expect(await store.valid(id, Date.parse(now))).toEqual({ ok: false, reason: 'not_in_token_set', tokenId: id });
    await redis.client.sadd(ApiTokenKeys.tokens(prefix), id);

    expect(await store.revoke(id, '2026-12-01T11:00:00.000Z')).toBe(true);
    expect(await store.revoke(id, '2026-12-01T12:00:00.000Z')).toBe(true);
    expect((await store.get(id))?.revoked_at).toBe('2026-12-01T11:00:00.000Z');
    expect(await store.valid(id, Date.parse(now))).toEqual({ ok: false, reason: 'revoked', tokenId: id });
    expect(await store.revoke('0123456789abcdef', now)).toBe(false);

    await redis.client.set(ApiTokenKeys.token(prefix, id), JSON.stringify({ token_id: id, role: 'root' }));
    expect(await store.get(id)).toBeNull();
    expect(await store.valid(id, Date.parse(now))).toEqual({ ok: false, reason: 'unknown', tokenId: id });
  });

  it('says which field breaks which rule, and writes nothing', async () => {
    const before = await redis.client.scard(ApiTokenKeys.tokens(prefix));
    const refusal = (input: Parameters<ApiTokenStore['create']>[0]) =>
      store.create(input).then(
        () => null,
        (error: unknown) => (error instanceof ApiTokenInputError ? error.issues.map((issue) => issue.field) : error),
      );
    expect(await refusal({ name: 'has space', role: 'viewer', projects: ['alpha'], now })).toEqual(['name']);
    expect(await refusal({ name: 'cy', role: 'operator', projects: [], now })).toEqual(['projects']);
    expect(await refusal({ name: 'cy', role: 'viewer', projects: ['alpha'], now, expiresAt: now })).toEqual(['expires_at']);
    expect(await redis.client.scard(ApiTokenKeys.tokens(prefix))).toBe(before);
  });

  it("refuses a name Baton's own actors use (token_name_reserved), whatever its case, and writes nothing", async () => {
    const before = await redis.client.scard(ApiTokenKeys.tokens(prefix));
    const codeOf = (name: string) =>
      store.create({ name, role: 'operator', projects: ['alpha'], now }).then(
        () => 'created',
        (error: unknown) => (error instanceof ApiTokenNameError ? error.code : error),
      );
    for (const name of ['baton-router', 'Baton-Watchdog', 'baton-cli', 'system', 'admin', 'ADMIN', 'project-client', 'engine_fallback'])
      expect({ name, code: await codeOf(name) }).toEqual({ name, code: 'token_name_reserved' });
    expect(RESERVED_TOKEN_NAMES).toEqual(
      expect.arrayContaining(['admin', 'system', 'project-client', 'baton-router', 'baton-ledger', 'baton-watchdog', 'baton-notifier']),
    );
    expect(await redis.client.scard(ApiTokenKeys.tokens(prefix))).toBe(before);
  });

  it('refuses a name an active token has (token_name_taken, naming it); a revoked or expired one frees it; rotate revokes the holder in the same write', async () => {
    const first = await store.create({ name: 'olga', role: 'operator', projects: ['alpha'], now });
    const taken = await store.create({ name: 'Olga', role: 'operator', projects: ['beta'], now }).then(
      () => null,
      (error: unknown) => error,
    );
    expect(taken).toBeInstanceOf(ApiTokenNameError);
    expect({ code: (taken as ApiTokenNameError).code, details: (taken as ApiTokenNameError).details }).toEqual({
      code: 'token_name_taken',
      details: { name: 'Olga', token_ids: [first.info.token_id] },
    });

    const rotated = await store.create({ name: 'olga', role: 'operator', projects: ['alpha'], now: '2026-12-01T10:05:00.000Z', ifNameTaken: 'rotate' });
    expect(rotated.rotated).toEqual([first.info.token_id]);
    expect(await store.valid(first.info.token_id, Date.parse(now))).toEqual({ ok: false, reason: 'revoked', tokenId: first.info.token_id });
    expect((await store.get(first.info.token_id))?.revoked_at).toBe('2026-12-01T10:05:00.000Z');
    expect((await store.valid(rotated.info.token_id, Date.parse(now))).ok).toBe(true);

    await store.revoke(rotated.info.token_id, now);
    expect((await store.create({ name: 'olga', role: 'operator', projects: ['alpha'], now })).rotated).toEqual([]);

    const brief = await store.create({ name: 'ivan', role: 'viewer', projects: ['alpha'], now, expiresAt: '2026-12-01T11:00:00Z' });
    expect(brief.rotated).toEqual([]);
    expect((await store.create({ name: 'ivan', role: 'viewer', projects: ['alpha'], now: '2026-12-01T12:00:00.000Z' })).rotated).toEqual([]);
  });

  it('two creations of one name at once: one token, the other refused token_name_taken', async () => {
    const results = await Promise.allSettled([0, 1, 2, 3].map(() => store.create({ name: 'race', role: 'viewer', projects: ['alpha'], now })));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results.filter((r): r is PromiseRejectedResult => r.status === 'rejected'))
      expect((r.reason as ApiTokenNameError).code).toBe('token_name_taken');
    expect(await store.activeNamed('race', Date.parse(now))).toHaveLength(1);
  });
});
