import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { deploymentStreamNames } from '@baton/eventstore';
import { ApiTokenKeys, ApiTokenStore, RUNTIME, StartupError, type ApiTokenRecord, type ServiceRuntime } from '@baton/platform';
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startRedisServer, type PrivateServer } from '../../../../libs/eventstore/src/int/servers';
import { startNotifier } from '../main';
import { NOTIFIER_CONFIG, type NotifierConfig } from '../notifier.config';
import { authFixture } from './auth.int-support';
import { AuthService } from './auth.service';
import { SESSION_COOKIE } from './cookies';
import { SessionStore } from './session-store';

/*
 * Security audit finding 3: the operator API's token authority was "whoever can write Redis" — a
 * token record written straight into Redis (what `baton token create` did, run with nothing but
 * REDIS_URL) authenticated as an admin of every project. A notifier given the deployment's token
 * key (BATON_TOKEN_KEY_FILE) trusts only records, and browser sessions, signed with it: one written
 * without the key is refused 401 `unsigned`; the upgrade signs the records it keeps
 * (`signExisting`, `baton token sign-existing`). Redis here is a private redis-server that asks for
 * a password, given in REDIS_URL as the docs say (redis://:<password>@host:port); NATS the shared
 * server under this test's own prefix.
 */

describe('the notifier trusts only token records and sessions signed with the deployment token key (real Redis with a password)', () => {
  const password = randomBytes(12).toString('hex');
  let server: PrivateServer;
  let redisUrl: string;
  beforeAll(async () => {
    server = await startRedisServer({ args: ['--requirepass', password] });
    redisUrl = `redis://:${password}@127.0.0.1:${server.port}`;
  }, 60_000);
  const fixture = authFixture({ prefix: 'ts', dir: 'token-signing', env: () => ({ REDIS_URL: redisUrl }) });
  const { prefix, inbox } = fixture;
  afterAll(async () => {
    await server?.remove();
  }, 30_000);
  // The two starts that failed may have provisioned their prefixes' streams before they stopped.
  fixture.beforeStop(async () => {
    for (const p of [`${prefix}x`, `${prefix}y`])
      for (const name of deploymentStreamNames(p)) await fixture.nats.jsm.streams.delete(name).catch(() => undefined);
  });
  /** What the CLI writes with the key. */
  let signed: ApiTokenStore;
  /** What the audit did: a store without the key, on the same Redis (`baton token create` with REDIS_URL only). */
  let keyless: ApiTokenStore;
  beforeAll(() => {
    signed = new ApiTokenStore(fixture.redis.client, prefix, fixture.key);
    keyless = new ApiTokenStore(fixture.redis.client, prefix);
  });

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const record = async (id: string) => JSON.parse((await fixture.redis.client.get(ApiTokenKeys.token(prefix, id)))!) as ApiTokenRecord;

  it('an admin token written into Redis without the key (the audit’s `token create` with REDIS_URL only) is refused 401 unsigned; a signed one is taken', async () => {
    const minted = await keyless.create({ name: 'mallory', role: 'admin', projects: '*', now: new Date().toISOString() });
    expect(await inbox(bearer(minted.token))).toMatchObject({ status: 401, code: 'unauthenticated', reason: 'unsigned' });
    expect((await inbox(bearer(minted.token))).message).toContain('baton token sign-existing');
    // Said only to the holder of the secret: with another one, the id is as good as unknown.
    expect(await inbox(bearer(`bt_${minted.info.token_id}_${'Z'.repeat(43)}`))).toMatchObject({ status: 401, reason: 'unknown' });

    const admin = await signed.create({ name: 'ada', role: 'admin', projects: '*', now: new Date().toISOString() });
    expect(await inbox(bearer(admin.token))).toMatchObject({ status: 200 });
  });

  it('a signed record altered in Redis — a viewer raised to admin, a revocation lifted — is refused unsigned', async () => {
    const viewer = await signed.create({ name: 'vera', role: 'viewer', projects: ['demo'], now: new Date().toISOString() });
    const original = await record(viewer.info.token_id);
    await fixture.redis.client.set(ApiTokenKeys.token(prefix, viewer.info.token_id), JSON.stringify({ ...original, role: 'admin', projects: '*' }));
    expect(await inbox(bearer(viewer.token))).toMatchObject({ status: 401, reason: 'unsigned' });
    await fixture.redis.client.set(ApiTokenKeys.token(prefix, viewer.info.token_id), JSON.stringify(original));
    expect(await inbox(bearer(viewer.token))).toMatchObject({ status: 200 });

    await signed.revoke(viewer.info.token_id, new Date().toISOString());
    expect(await inbox(bearer(viewer.token))).toMatchObject({ status: 401, reason: 'revoked' });
    const revoked = await record(viewer.info.token_id);
    await fixture.redis.client.set(ApiTokenKeys.token(prefix, viewer.info.token_id), JSON.stringify({ ...revoked, revoked_at: null }));
    expect(await inbox(bearer(viewer.token))).toMatchObject({ status: 401, reason: 'unsigned' });
  });

  it("a browser session written into Redis for an admin's token id is no session (401 session_ended); one the notifier signed is", async () => {
    const admin = await signed.create({ name: 'adele', role: 'admin', projects: '*', now: new Date().toISOString() });
    const principal = { tokenId: admin.info.token_id, name: 'adele', role: 'admin' as const, projects: '*' as const, via: 'token' as const };
    const tokens = fixture.service.app.get(AuthService).tokens;
    const forged = await new SessionStore(fixture.redis.client, prefix, tokens, 600).create(principal, new Date().toISOString());
    expect(await inbox({ cookie: `${SESSION_COOKIE}=${forged.id}` })).toMatchObject({ status: 401, reason: 'session_ended' });
    const genuine = await new SessionStore(fixture.redis.client, prefix, tokens, 600, fixture.key).create(principal, new Date().toISOString());
    expect(await inbox({ cookie: `${SESSION_COOKIE}=${genuine.id}` })).toMatchObject({ status: 200 });
  });

  it('the upgrade: the notifier names the active records it refuses, and says when it holds no key; records made before the key authenticate once signed (sign-existing)', async () => {
    const before = await keyless.create({ name: 'olga', role: 'operator', projects: ['demo'], now: new Date().toISOString() });
    expect(await inbox(bearer(before.token))).toMatchObject({ status: 401, reason: 'unsigned' });

    // What the notifier says at start (and now): how many active records it refuses, and how to sign them.
    const auth = fixture.service.app.get(AuthService);
    const runtime = fixture.service.app.get<ServiceRuntime>(RUNTIME);
    const warn = jest.spyOn(runtime.logger, 'warn');
    try {
      await auth.onApplicationBootstrap();
      const said = warn.mock.calls.find(([, fields]) => (fields as { warning?: string } | undefined)?.warning === 'token_records_unsigned');
      expect(said?.[0]).toContain('baton token sign-existing');
      expect((said?.[1] as { token_ids: string[] }).token_ids).toContain(before.info.token_id);

      // A notifier without a key says that every record in Redis is trusted.
      warn.mockClear();
      const config = fixture.service.app.get<NotifierConfig>(NOTIFIER_CONFIG);
      await new AuthService(runtime, { ...config, BATON_TOKEN_KEY_FILE: undefined }).onApplicationBootstrap();
      expect(warn.mock.calls.map(([, fields]) => (fields as { warning?: string }).warning)).toEqual(['token_key_missing']);
    } finally {
      warn.mockRestore();
    }

    const migrated = await signed.signExisting();
    expect(migrated.signed.map((r) => r.token_id)).toContain(before.info.token_id);
    expect(await inbox(bearer(before.token))).toMatchObject({ status: 200 });
  });

  it('REDIS_URL carries the password; a wrong one stops the start naming REDIS_URL, never the password', async () => {
    const wrong = `wrong${randomBytes(6).toString('hex')}`;
    const failed = await startNotifier({
      ...process.env,
      BATON_PREFIX: `${prefix}x`,
      REDIS_URL: `redis://:${wrong}@127.0.0.1:${server.port}`,
      HTTP_PORT: '0',
      LOG_LEVEL: 'error',
      BATON_TOKEN_KEY_FILE: fixture.key.file,
    }).then(
      async (started) => {
        await started.stop();
        return null;
      },
      (error: unknown) => error,
    );
    expect(failed).toBeInstanceOf(StartupError);
    expect((failed as StartupError).variable).toBe('REDIS_URL');
    expect((failed as StartupError).message).toContain(`redis://:***@127.0.0.1:${server.port}`);
    expect((failed as StartupError).message).not.toContain(wrong);
  });

  it('an unreadable BATON_TOKEN_KEY_FILE is a configuration problem naming it: the notifier does not start trusting Redis instead', async () => {
    await expect(
      startNotifier({
        ...process.env,
        BATON_PREFIX: `${prefix}y`,
        REDIS_URL: redisUrl,
        HTTP_PORT: '0',
        LOG_LEVEL: 'error',
        BATON_TOKEN_KEY_FILE: join(fixture.dir, 'absent.key'),
      }),
    ).rejects.toThrow(/BATON_TOKEN_KEY_FILE: cannot read the token key/);
  });
});
