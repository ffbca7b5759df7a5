import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectNats, deploymentStreamNames, type NatsHandle } from '@baton/eventstore';
import { ApiTokenKeys, ApiTokenStore, ensureTokenKeyFile, TokenRevocationLog, type RunningService, type TokenKey } from '@baton/platform';
import { createRedis, type RedisHandle } from '@baton/projections';
import { startNotifier } from '../main';

/*
 * Test support for the notifier's auth integration specs (not a spec): a token key in a temp dir,
 * a Redis and a NATS connection, the notifier started in process on the spec's own prefix with
 * BATON_TOKEN_KEY_FILE, and a wait until a signed token reads the inbox (200). After the spec: the
 * cleanups it registered with `beforeStop`, the notifier stopped, the prefix's streams deleted
 * (`deploymentStreamNames`: the token revocation log with them) and its Redis keys, the
 * connections closed. `authFixture` registers the beforeAll and afterAll hooks where it is called
 * (jest runs them in declaration order: a server the spec starts in a beforeAll declared before
 * the call is up when the notifier starts; one it removes in an afterAll declared after the call
 * outlives the notifier).
 */

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export interface AuthFixtureOptions {
  /** The head of the prefix (a random suffix is added): the spec's own streams and keys. */
  prefix: string;
  /** Name of the temp dir the token key is written in. */
  dir?: string;
  /** Env on top of process.env (NATS_URL, REDIS_URL of a server the spec started…), read when the notifier starts; also where the fixture connects. */
  env?: () => Record<string, string>;
  /** Give the notifier a token key (BATON_TOKEN_KEY_FILE). Default true; without one, `admin` writes unsigned records and `key` throws. */
  tokenKey?: boolean;
  /** Run before the notifier starts (a listener that must hear its first requests). */
  beforeStart?: (fixture: AuthFixture) => Promise<void> | void;
}

export interface AuthFixture {
  readonly prefix: string;
  readonly nats: NatsHandle;
  readonly redis: RedisHandle;
  readonly service: RunningService;
  /** http://127.0.0.1:<port> */
  readonly base: string;
  /** The temp dir holding the token key. */
  readonly dir: string;
  readonly key: TokenKey;
  /** What the CLI writes with: the key and the token revocation log (no key: unsigned records, no log). */
  readonly admin: ApiTokenStore;
  /** GET /v1/inbox with a bearer token (a string) or these headers: status, error code, `details.reason`, message. */
  readonly inbox: (
    auth: string | Record<string, string>,
  ) => Promise<{ status: number; code?: string | undefined; reason?: string | undefined; message?: string | undefined }>;
  /** A token's record as Redis holds it (a JSON string). */
  readonly raw: (tokenId: string) => Promise<string>;
  /** Register a cleanup that runs in the afterAll before the notifier stops (the fixture's connections still open). */
  readonly beforeStop: (cleanup: () => Promise<void> | void) => void;
}

/** Register the hooks that start and clean up a notifier on `options.prefix` plus a random suffix; returns the getters. */
export function authFixture(options: AuthFixtureOptions): AuthFixture {
  const prefix = `${options.prefix}${randomBytes(5).toString('hex')}`;
  const state: {
    nats?: NatsHandle;
    redis?: RedisHandle;
    service?: RunningService;
    /** The notifier's start, kept: a beforeAll that timed out leaves it running, and afterAll stops what it started. */
    starting?: Promise<RunningService>;
    base?: string;
    dir?: string;
    key?: TokenKey;
    admin?: ApiTokenStore;
  } = {};
  const cleanups: Array<() => Promise<void> | void> = [];
  const got = <K extends keyof typeof state>(name: K): NonNullable<(typeof state)[K]> => {
    const value = state[name];
    if (value === undefined) throw new Error(`authFixture: no ${name} (read it inside a test or a later hook; tokenKey: false has no key)`);
    return value as NonNullable<(typeof state)[K]>;
  };

  const fixture: AuthFixture = {
    prefix,
    get nats() {
      return got('nats');
    },
    get redis() {
      return got('redis');
    },
    get service() {
      return got('service');
    },
    get base() {
      return got('base');
    },
    get dir() {
      return got('dir');
    },
    get key() {
      return got('key');
    },
    get admin() {
      return got('admin');
    },
    inbox: async (auth) => {
      const headers = typeof auth === 'string' ? { authorization: `Bearer ${auth}` } : auth;
      const response = await fetch(`${fixture.base}/v1/inbox`, { headers });
      const body = (await response.json()) as { error?: { code: string; message: string; details?: { reason?: string } } };
      return { status: response.status, code: body.error?.code, reason: body.error?.details?.reason, message: body.error?.message };
    },
    raw: async (tokenId) => (await fixture.redis.client.get(ApiTokenKeys.token(prefix, tokenId)))!,
    beforeStop: (cleanup) => void cleanups.push(cleanup),
  };

  beforeAll(async () => {
    const env = options.env?.() ?? {};
    state.dir = mkdtempSync(join(tmpdir(), `baton-${options.dir ?? 'auth'}-`));
    if (options.tokenKey !== false) state.key = ensureTokenKeyFile(state.dir).key;
    state.redis = createRedis(env['REDIS_URL'] ?? process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
    await state.redis.ping();
    state.nats = await connectNats({ servers: env['NATS_URL'] ?? process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222', reconnect: false });
    await options.beforeStart?.(fixture);
    state.starting = startNotifier({
      ...process.env,
      BATON_PREFIX: prefix,
      HTTP_PORT: '0',
      LOG_LEVEL: 'error',
      NOTIFIER_AUTH_FAILURES_PER_MINUTE: '0',
      ...(state.key ? { BATON_TOKEN_KEY_FILE: state.key.file } : {}),
      ...env,
    });
    state.service = await state.starting;
    state.base = (await state.service.app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
    state.admin = state.key
      ? new ApiTokenStore(state.redis.client, prefix, state.key, new TokenRevocationLog(state.nats, prefix, state.key))
      : new ApiTokenStore(state.redis.client, prefix);
    // The projections are built (an empty stream): a valid token reads the inbox.
    const probe = await state.admin.create({ name: 'probe', role: 'viewer', projects: ['demo'], now: new Date().toISOString() });
    const deadline = Date.now() + 15_000;
    while ((await fixture.inbox(probe.token)).status !== 200) {
      if (Date.now() > deadline) throw new Error('the inbox never answered 200 to a signed token');
      await sleep(100);
    }
  }, 60_000);

  afterAll(async () => {
    const failures: unknown[] = [];
    for (const cleanup of cleanups) await (async () => cleanup())().catch((error: unknown) => failures.push(error));
    // A start still under way (the beforeAll timed out) makes the token revocation stream last of
    // all: wait for it, so the notifier is stopped and the stream deleted after it was made.
    state.service ??= await state.starting?.catch(() => undefined);
    await state.service?.stop().catch(() => undefined);
    for (const name of deploymentStreamNames(prefix)) await state.nats?.jsm.streams.delete(name).catch(() => undefined);
    if (state.redis) {
      for await (const batch of state.redis.client.scanStream({ match: `${prefix}:*`, count: 500 })) {
        const keys = batch as string[];
        if (keys.length > 0) await state.redis.client.unlink(...keys);
      }
    }
    await state.redis?.close().catch(() => undefined);
    await state.nats?.drain().catch(() => undefined);
    if (state.dir) rmSync(state.dir, { recursive: true, force: true });
    if (failures.length > 0) throw failures[0];
  }, 30_000);

  return fixture;
}
