import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Principals } from '@baton/contracts';
import { connectNats, ensureServiceCreds, issueCreds, openDeployment, writeServerConfig, type NatsHandle } from '@baton/eventstore';
import { ApiTokenKeys, ApiTokenStore, ensureTokenKeyFile, TokenRevocationLog, tokenRevocationStreamName, type TokenKey } from '@baton/platform';
import { createRedis, type RedisHandle } from '@baton/projections';
// eslint-disable-next-line @nx/enforce-module-boundaries
import { freePort, startNatsServer, type PrivateNatsServer } from '../../../libs/eventstore/src/int/servers';
// eslint-disable-next-line @nx/enforce-module-boundaries -- test-only helper, by path as libs/eventstore/src/int/servers is
import { cleanupDeployment } from '../../../libs/testing/src/deployment';
import { main } from './main';
import { bufferedIo } from './output';

/*
 * `baton token list` shows each token's revocation as the notifier sees it: its record in Redis
 * against the deployment's token revocation log (JetStream, `<PREFIX>_TOKEN_REVOCATIONS`). A
 * revocation made through the CLI is in the log; one made before the log existed is in Redis only
 * (the list says so, and names `baton token sign-existing`, which copies it into the log); a record
 * from before the revocation put back is the log's word against Redis's. A log that cannot be read
 * — NATS down, no token key, credentials that may not read it — leaves the list answering from
 * Redis, each revocation `unknown` with its reason, exit 0. Real NATS and Redis, a prefix of its
 * own; a private nats-server with Baton's authentication for the credentials case.
 */

const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const prefix = `tkl${randomBytes(5).toString('hex')}`;
let redis: RedisHandle;
let nats: NatsHandle;
let dir: string;
let key: TokenKey;

interface Listed {
  token_id: string;
  name: string;
  revoked_at: string | null;
  signature: string;
  revocation: string;
  revocation_logged_at: string | null;
  revocation_unknown_reason: string | null;
}

async function baton(env: Record<string, string | undefined>, ...argv: string[]) {
  const io = bufferedIo();
  const code = await main(argv, {
    io,
    env: { BATON_PREFIX: prefix, USER: 'ada', BATON_NATS_DIR: join(dir, 'no-deployment'), REDIS_URL, NATS_URL, BATON_TOKEN_KEY_FILE: key.file, ...env },
  });
  return { code, out: io.out(), err: io.err() };
}

/** `token list --json` (exit 0 asserted), by token id. */
async function listed(env: Record<string, string | undefined> = {}): Promise<Record<string, Listed>> {
  const result = await baton(env, 'token', 'list', '--json');
  expect({ code: result.code, err: result.err }).toEqual({ code: 0, err: '' });
  return Object.fromEntries((JSON.parse(result.out) as Listed[]).map((r) => [r.token_id, r]));
}

/** The table row of a token. */
const rowOf = (table: string, tokenId: string) => table.split('\n').find((line) => line.startsWith(tokenId)) ?? '';

const stream = () => tokenRevocationStreamName(prefix);
const streamExists = async () =>
  await nats.jsm.streams.info(stream()).then(
    () => true,
    () => false,
  );

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'baton-token-list-'));
  key = ensureTokenKeyFile(join(dir, 'deployment')).key;
  redis = createRedis(REDIS_URL);
  await redis.ping();
  nats = await connectNats({ servers: NATS_URL, reconnect: false });
});

afterAll(async () => {
  // This prefix's keys and streams (the revocation log the CLI made); a stream left is an error.
  try {
    await cleanupDeployment(nats, redis.client, prefix);
  } finally {
    await nats.drain();
    await redis.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

describe('baton token list shows whether each revocation is in the token revocation log (real NATS and Redis)', () => {
  it('a revocation written to Redis only (before the log existed) shows Redis only, naming sign-existing; once copied it shows in the log', async () => {
    // What a deployment before the log wrote: signed records, the revocation in Redis alone.
    const before = new ApiTokenStore(redis.client, prefix, key);
    const old = await before.create({ name: 'otto', role: 'viewer', projects: ['demo'], now: new Date().toISOString() });
    await before.revoke(old.info.token_id, new Date().toISOString());
    const active = await before.create({ name: 'anna', role: 'operator', projects: ['demo'], now: new Date().toISOString() });
    const revokedAt = (await before.get(old.info.token_id))!.revoked_at!;
    expect(await streamExists()).toBe(false);

    // No log at all yet: it holds no revocation.
    expect(await listed()).toMatchObject({
      [old.info.token_id]: { revoked_at: revokedAt, revocation: 'redis_only', revocation_logged_at: null, revocation_unknown_reason: null },
      [active.info.token_id]: { revoked_at: null, revocation: 'not_revoked', revocation_logged_at: null, revocation_unknown_reason: null },
    });
    const missing = await baton({}, 'token', 'list');
    expect(missing.code).toBe(0);
    expect(rowOf(missing.out, old.info.token_id)).toMatch(/ Redis only$/);
    expect(rowOf(missing.out, active.info.token_id)).toMatch(/ not revoked$/);
    expect(missing.out).toContain(`note: the revocation log ${stream()} does not exist`);
    // list reads the log, it never makes it.
    expect(await streamExists()).toBe(false);

    // A log that holds other revocations and not this one: the same.
    await new TokenRevocationLog(nats, prefix, key).ensure();
    expect((await listed())[old.info.token_id]).toMatchObject({ revocation: 'redis_only' });
    const table = await baton({}, 'token', 'list');
    expect(rowOf(table.out, old.info.token_id)).toMatch(/ Redis only$/);
    expect(table.out).toContain(`note: 1 revocation(s) are in Redis only, not in the revocation log ${stream()}`);
    expect(table.out).toContain('Copy them into the log: baton token sign-existing');
    expect(table.out).not.toContain('does not exist');

    // The documented fix, then the list says so.
    const signed = await baton({}, 'token', 'sign-existing', '--json');
    expect((JSON.parse(signed.out) as { revocations_recorded: string[] }).revocations_recorded).toEqual([old.info.token_id]);
    expect((await listed())[old.info.token_id]).toMatchObject({ revocation: 'in_log', revocation_logged_at: revokedAt });
    const fixed = await baton({}, 'token', 'list');
    expect(rowOf(fixed.out, old.info.token_id)).toMatch(/ in the log$/);
    expect(fixed.out).not.toContain('note:');
  });

  it('a token revoked through the CLI shows in the log; its record from before the revocation put back shows the log against Redis', async () => {
    const made = await baton({}, 'token', 'create', '--role', 'operator', '--project', 'demo', '--name', 'rita', '--json');
    expect(made.code).toBe(0);
    const { token_id } = JSON.parse(made.out) as { token_id: string };
    const unrevoked = (await redis.client.get(ApiTokenKeys.token(prefix, token_id)))!;
    expect((await listed())[token_id]).toMatchObject({ revocation: 'not_revoked', revocation_logged_at: null });

    const revoked = JSON.parse((await baton({}, 'token', 'revoke', token_id, '--json')).out) as { revoked_at: string };
    expect((await listed())[token_id]).toMatchObject({
      revoked_at: revoked.revoked_at,
      signature: 'valid',
      revocation: 'in_log',
      revocation_logged_at: revoked.revoked_at,
      revocation_unknown_reason: null,
    });
    expect(rowOf((await baton({}, 'token', 'list')).out, token_id)).toMatch(/ in the log$/);

    // A Redis writer puts back the record from before the revocation: the log still says revoked.
    await redis.client.set(ApiTokenKeys.token(prefix, token_id), unrevoked);
    expect((await listed())[token_id]).toMatchObject({ revoked_at: null, revocation: 'rolled_back', revocation_logged_at: revoked.revoked_at });
    const table = await baton({}, 'token', 'list');
    expect(rowOf(table.out, token_id)).toMatch(/ in the log; Redis says active$/);
    expect(table.out).toContain(`note: the revocation log says ${token_id} revoked while Redis says active`);
    expect(table.out).toContain('baton token revoke');
  });

  it('with the log unreadable (NATS down, no token key) the list still answers from Redis: each revocation unknown with its reason, a note line, exit 0', async () => {
    const tokens = await listed();
    const ids = Object.keys(tokens);
    expect(ids.length).toBeGreaterThanOrEqual(3);

    const down = `nats://127.0.0.1:${await freePort()}`;
    const unread = await listed({ NATS_URL: down });
    expect(Object.keys(unread).sort()).toEqual([...ids].sort());
    for (const id of ids)
      expect(unread[id]).toEqual({
        ...tokens[id],
        revocation: 'unknown',
        revocation_logged_at: null,
        revocation_unknown_reason: 'unavailable',
      });
    const table = await baton({ NATS_URL: down }, 'token', 'list');
    expect(table.code).toBe(0);
    for (const id of ids) expect(rowOf(table.out, id)).toMatch(/ unknown$/);
    expect(table.out).toMatch(/\nnote: revocation log unknown \(unavailable\): cannot reach NATS at .*the revoked column says what Redis holds/);

    // No key named: the log's entries cannot be checked (and NATS is not asked).
    const keyless = await listed({ BATON_TOKEN_KEY_FILE: undefined, NATS_URL: down });
    for (const id of ids)
      expect(keyless[id]).toMatchObject({
        signature: 'unchecked',
        revocation: 'unknown',
        revocation_unknown_reason: 'token_key_missing',
        revoked_at: tokens[id]!.revoked_at,
      });
    expect((await baton({ BATON_TOKEN_KEY_FILE: undefined }, 'token', 'list')).out).toContain(
      'note: revocation log unknown (token_key_missing): no token key is named (BATON_TOKEN_KEY_FILE)',
    );
  });
});

/**
 * Credentials that may not read the log: on a nats-server with Baton's authentication, the
 * admin's read it; another principal's (a service's: the router's) are refused it, and the list
 * answers from Redis with the revocation `unknown`, `permission_denied`.
 */
describe('baton token list with NATS credentials that may not read the revocation log (a real nats-server with Baton authentication)', () => {
  let server: PrivateNatsServer | undefined;
  let admin: string;
  let router: string;

  beforeAll(async () => {
    const deployment = openDeployment(join(dir, 'nats-auth'), prefix);
    const services = ensureServiceCreds(deployment);
    const port = await freePort();
    server = await startNatsServer({ port, config: writeServerConfig(deployment, { listen: `127.0.0.1:${port}`, storeDir: join(dir, 'jetstream') }) });
    admin = issueCreds(deployment, Principals.operator('admin')).file;
    router = services['router']!;
  });

  afterAll(async () => {
    await server?.remove();
  });

  it("the admin's credentials read it; the router's are refused: revocation unknown, permission_denied, exit 0", async () => {
    const on = (creds: string) => ({ NATS_URL: server!.url, NATS_CREDS: creds });
    const made = JSON.parse((await baton(on(admin), 'token', 'create', '--role', 'viewer', '--project', 'demo', '--name', 'pia', '--json')).out) as {
      token_id: string;
    };
    expect((await baton(on(admin), 'token', 'revoke', made.token_id)).code).toBe(0);
    expect((await listed(on(admin)))[made.token_id]).toMatchObject({ revocation: 'in_log' });

    const refused = await listed(on(router));
    expect(refused[made.token_id]).toMatchObject({ revoked_at: expect.any(String), revocation: 'unknown', revocation_unknown_reason: 'permission_denied' });
    const table = await baton(on(router), 'token', 'list');
    expect(table.code).toBe(0);
    expect(table.out).toContain('note: revocation log unknown (permission_denied)');
  });
});
