import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRedis, type RedisHandle } from '@baton/projections';
import { ApiTokenKeys, parseApiToken, type ApiTokenRecord } from './api-token';
import { ApiTokenInputError, ApiTokenKeyRequiredError, ApiTokenNameError, ApiTokenStore, RESERVED_TOKEN_NAMES } from './api-token-store';
import { ensureTokenKeyFile, type TokenKey } from './token-key';

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

  it("a creation whose name lock ran out and was taken by another creation just as it releases it leaves the other's lock (compare-and-delete, never read-then-delete)", async () => {
    const lockKey = `${prefix}:auth:name-lock:lapse`;
    const other = 'another-creation';
    let tookOver = false;
    /** The lease runs out (expires in Redis) and another creation takes the name lock. */
    const takeOver = async () => {
      if (tookOver) return;
      tookOver = true;
      await redis.client.pexpire(lockKey, 1);
      while ((await redis.client.exists(lockKey)) === 1) await new Promise((resolve) => setTimeout(resolve, 2));
      expect(await redis.client.set(lockKey, other, 'PX', 10_000, 'NX')).toBe('OK');
    };
    // The store's own client, every command on the real Redis, with one moment made to happen:
    // right before the creation's release acts on the lock (after it read the lock as its own, or
    // as its compare-and-delete goes out), the lease runs out and another creation takes it.
    const client = redis.client;
    const timed = new Proxy(client, {
      get(target, property) {
        if (property === 'get')
          return async (key: string) => {
            const value = await target.get(key);
            if (key === lockKey) await takeOver();
            return value;
          };
        if (property === 'eval')
          return async (script: string, keys: number, ...args: (string | number)[]) => {
            if (args[0] === lockKey && script.includes("'DEL'")) await takeOver();
            return target.eval(script, keys, ...args);
          };
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const created = await new ApiTokenStore(timed, prefix).create({ name: 'lapse', role: 'viewer', projects: ['alpha'], now });
    expect(created.info).toMatchObject({ name: 'lapse' });
    expect(tookOver).toBe(true);
    expect(await redis.client.get(lockKey)).toBe(other);
    expect(await redis.client.pttl(lockKey)).toBeGreaterThan(0);
  });
});

describe('ApiTokenStore with the deployment token key (real Redis): Redis alone is no token authority', () => {
  const keyed = `${prefix}k`;
  let dir: string;
  let key: TokenKey;
  let signer: ApiTokenStore;
  /** What the audit did: `baton token create` with REDIS_URL only, i.e. a store without the key. */
  let keyless: ApiTokenStore;
  const at = Date.parse(now);
  const raw = async (id: string) => JSON.parse((await redis.client.get(ApiTokenKeys.token(keyed, id)))!) as ApiTokenRecord;
  const write = (record: ApiTokenRecord) => redis.client.set(ApiTokenKeys.token(keyed, record.token_id), JSON.stringify(record));

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'baton-token-key-'));
    key = ensureTokenKeyFile(dir).key;
    signer = new ApiTokenStore(redis.client, keyed, key);
    keyless = new ApiTokenStore(redis.client, keyed);
  });

  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    for await (const batch of redis.client.scanStream({ match: `${keyed}:*`, count: 500 })) {
      const keys = batch as string[];
      if (keys.length > 0) await redis.client.unlink(...keys);
    }
  });

  it('signs what it writes; a record written without the key — an admin token minted by whoever can write Redis — is unsigned, not valid', async () => {
    const made = await signer.create({ name: 'sig', role: 'operator', projects: ['alpha'], now });
    expect((await raw(made.info.token_id)).mac).toMatch(/^[0-9a-f]{64}$/);
    expect(await signer.valid(made.info.token_id, at)).toMatchObject({ ok: true });
    // The listing never shows the MAC.
    expect((await signer.list()).find((r) => r.token_id === made.info.token_id)).toEqual(made.info);

    const minted = await keyless.create({ name: 'mallory', role: 'admin', projects: '*', now });
    expect((await raw(minted.info.token_id)).mac).toBeUndefined();
    expect(await signer.valid(minted.info.token_id, at)).toEqual({ ok: false, reason: 'unsigned', tokenId: minted.info.token_id });
    // A store without a key (a notifier not given one) trusts it as before.
    expect(await keyless.valid(minted.info.token_id, at)).toMatchObject({ ok: true });
  });

  it('an altered signed record (role raised, projects widened, revocation lifted, copied under another id, another key) does not verify', async () => {
    const made = await signer.create({ name: 'vik', role: 'viewer', projects: ['alpha'], now });
    const id = made.info.token_id;
    const signed = await raw(id);
    for (const altered of [{ role: 'admin' as const }, { projects: '*' as const }, { projects: ['alpha', 'beta'] }, { expires_at: null, created_by: 'root' }]) {
      await write({ ...signed, ...altered });
      expect({ altered, check: await signer.valid(id, at) }).toEqual({ altered, check: { ok: false, reason: 'signature_mismatch', tokenId: id } });
    }
    await write(signed);
    expect(await signer.valid(id, at)).toMatchObject({ ok: true });

    // Revoked and signed again: putting revoked_at back to null (keeping the new MAC) does not verify.
    await signer.revoke(id, '2026-12-01T11:00:00.000Z');
    const revoked = await raw(id);
    expect(revoked.mac).not.toBe(signed.mac);
    expect(await signer.valid(id, at)).toEqual({ ok: false, reason: 'revoked', tokenId: id });
    await write({ ...revoked, revoked_at: null });
    expect(await signer.valid(id, at)).toEqual({ ok: false, reason: 'signature_mismatch', tokenId: id });

    // A signed record copied under another id: it names another id than its key's, so it is no record.
    const copyId = '00000000000000aa';
    await redis.client.multi().set(ApiTokenKeys.token(keyed, copyId), JSON.stringify(signed)).sadd(ApiTokenKeys.tokens(keyed), copyId).exec();
    expect(await signer.valid(copyId, at)).toEqual({ ok: false, reason: 'unknown', tokenId: copyId });
    await redis.client.set(ApiTokenKeys.token(keyed, copyId), JSON.stringify({ ...signed, token_id: copyId }));
    expect(await signer.valid(copyId, at)).toEqual({ ok: false, reason: 'signature_mismatch', tokenId: copyId });

    // Another deployment's key (or prefix) does not verify it either.
    const other = mkdtempSync(join(tmpdir(), 'baton-token-key-'));
    try {
      const fresh = await signer.create({ name: 'vik2', role: 'viewer', projects: ['alpha'], now });
      expect(await new ApiTokenStore(redis.client, keyed, ensureTokenKeyFile(other).key).valid(fresh.info.token_id, at)).toMatchObject({
        reason: 'signature_mismatch',
      });
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });

  it('a record a newer release wrote (a field this one does not know) is read, listed, authenticates and is revoked and signed here, its unknown field kept', async () => {
    // What the upgrade audit found the other way round: an earlier release refused records with a
    // field it did not know (mac), so its `token list` hid them and its `token revoke` said not_found.
    const made = await signer.create({ name: 'nova', role: 'operator', projects: ['alpha'], now });
    const id = made.info.token_id;
    const future = { introduced_in: 'a later release', limits: { per_minute: 5 } };
    await redis.client.set(ApiTokenKeys.token(keyed, id), JSON.stringify({ ...(await raw(id)), future }));
    expect(await signer.get(id)).toMatchObject({ token_id: id, name: 'nova', revoked_at: null });
    expect(await signer.valid(id, at)).toMatchObject({ ok: true });
    expect((await signer.list()).map((info) => info.token_id)).toContain(id);

    expect(await signer.revoke(id, '2026-12-01T11:00:00.000Z')).toBe(true);
    const revoked = (await raw(id)) as ApiTokenRecord & { future?: unknown };
    expect(revoked).toMatchObject({ revoked_at: '2026-12-01T11:00:00.000Z', future });
    expect(await signer.valid(id, at)).toEqual({ ok: false, reason: 'revoked', tokenId: id });

    // Signing one written without the key keeps the field too.
    const unsigned = await keyless.create({ name: 'orla', role: 'viewer', projects: ['alpha'], now });
    const uid = unsigned.info.token_id;
    await redis.client.set(ApiTokenKeys.token(keyed, uid), JSON.stringify({ ...(await raw(uid)), future }));
    expect(await signer.valid(uid, at)).toMatchObject({ ok: false, reason: 'unsigned' });
    const migrated = await signer.signExisting();
    expect(migrated.signed.map((info) => info.token_id)).toContain(uid);
    expect(await raw(uid)).toMatchObject({ future, mac: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(await signer.valid(uid, at)).toMatchObject({ ok: true });
    // A record that breaks a known field's rule is still no record.
    await redis.client.set(ApiTokenKeys.token(keyed, uid), JSON.stringify({ ...(await raw(uid)), role: 'root', future }));
    expect(await signer.get(uid)).toBeNull();
  });

  it('sign-existing (the upgrade): signs the records that have no MAC as they stand, leaves altered ones, dry-run writes nothing; needs the key', async () => {
    const legacy = await keyless.create({ name: 'old-olga', role: 'operator', projects: ['alpha'], now });
    const legacyRevoked = await keyless.create({ name: 'old-gus', role: 'viewer', projects: ['alpha'], now });
    await keyless.revoke(legacyRevoked.info.token_id, now);
    const tampered = await signer.create({ name: 'tam', role: 'viewer', projects: ['alpha'], now });
    await write({ ...(await raw(tampered.info.token_id)), role: 'admin' });
    expect(signer.signatureOf(await raw(legacy.info.token_id))).toBe('unsigned');

    await expect(keyless.signExisting()).rejects.toBeInstanceOf(ApiTokenKeyRequiredError);
    const before = await raw(legacy.info.token_id);
    const dry = await signer.signExisting({ dryRun: true });
    expect(dry.signed.map((r) => r.token_id)).toEqual(expect.arrayContaining([legacy.info.token_id, legacyRevoked.info.token_id]));
    expect(await raw(legacy.info.token_id)).toEqual(before);

    const done = await signer.signExisting();
    const signedIds = done.signed.map((r) => r.token_id);
    expect(signedIds).toEqual(expect.arrayContaining([legacy.info.token_id, legacyRevoked.info.token_id]));
    expect(signedIds).not.toContain(tampered.info.token_id);
    expect(done.mismatched.map((r) => r.token_id)).toContain(tampered.info.token_id);
    expect(done.changed).toEqual([]);
    expect(await signer.valid(legacy.info.token_id, at)).toMatchObject({ ok: true, record: { name: 'old-olga', role: 'operator', projects: ['alpha'] } });
    expect(await signer.valid(legacyRevoked.info.token_id, at)).toMatchObject({ reason: 'revoked' });
    expect(await signer.valid(tampered.info.token_id, at)).toMatchObject({ reason: 'signature_mismatch' });

    const again = await signer.signExisting();
    expect(again.signed).toEqual([]);
    expect(again.already_signed).toBeGreaterThanOrEqual(signedIds.length);
  });
});
