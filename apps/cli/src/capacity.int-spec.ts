import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inboxPrefixOf } from '@baton/contracts';
import { batonStreamNames, batonTopology, connectNats, provision, type NatsHandle } from '@baton/eventstore';
// eslint-disable-next-line @nx/enforce-module-boundaries
import { freePort, startNatsServer, type PrivateNatsServer } from '../../../libs/eventstore/src/int/servers';
import { main } from './main';
import { bufferedIo } from './output';

/*
 * Capacity an SRE can set safely and watch with Baton's own tools (docs/sre.md, "Capacity"), on a
 * real nats-server configured by `baton nats-config`:
 * - `--max-store` below what the account's streams need (max_bytes x replicas reserved, plus what
 *   the streams without a limit store) is refused `max_store_below_reserved` with the numbers,
 *   checked against the server's streams when it answers, else against the services' settings with
 *   a warning naming what was not checked; `--allow-below-reserved` writes it with a warning;
 * - with the deployment's server running, nats-config says to reload it (its pid, the command);
 * - `baton streams` shows each stream's max_bytes, discard policy and % used, and the account's
 *   storage limit and usage;
 * - the CLI's `storage_full` failure carries `details.limit`.
 */

const MiB = 1024 * 1024;
const PREFIX = 'cap';
const SETTINGS = { BATON_DLQ_MAX_BYTES: String(1 * MiB), BATON_INBOX_MAX_BYTES: String(2 * MiB) };

interface JsonError {
  error: { code: string; message: string; details?: Record<string, unknown> & { warnings?: { code: string }[] } };
}

describe('capacity: nats-config --max-store checked against the streams, baton streams shows it (real nats-server)', () => {
  let dir: string;
  let auth: string;
  let port: number;
  let server: PrivateNatsServer | undefined;
  let admin: NatsHandle | undefined;

  async function baton(env: Record<string, string>, ...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, { io, env: { BATON_NATS_DIR: auth, BATON_PREFIX: PREFIX, ...env } });
    return { code, out: io.out(), err: io.err() };
  }
  const config = (env: Record<string, string>, ...argv: string[]) =>
    baton(env, 'nats-config', '--listen', `127.0.0.1:${port}`, '--store-dir', join(dir, 'js'), ...argv);
  const limitsFile = () => join(auth, 'account-limits.json');
  const warningsOf = (err: string) =>
    err
      .split('\n')
      .filter((line) => line.startsWith('{"warnings"'))
      .flatMap((line) => (JSON.parse(line) as { warnings: { code: string; details?: Record<string, unknown> }[] }).warnings);

  const connectAdmin = async () => {
    await admin?.close().catch(() => undefined);
    admin = await connectNats({
      servers: server!.url,
      credsFile: join(auth, 'creds', 'admin.creds'),
      inboxPrefix: inboxPrefixOf(PREFIX, { kind: 'op', relay: 'admin' }),
      reconnect: false,
      name: 'capacity-int',
    });
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'baton-cli-capacity-'));
    auth = join(dir, 'nats-auth');
    port = await freePort();
  });

  afterAll(async () => {
    await admin?.close().catch(() => undefined);
    await server?.remove();
    await rm(dir, { recursive: true, force: true });
  });

  it('no server running: a --max-store below the DLQ`s and inbox`s configured reservations is refused with the numbers, nothing written; what it could not check is said', async () => {
    const refused = await config({}, '--max-store', '8MiB', '--json');
    expect(refused.code).toBe(1);
    const failure = JSON.parse(refused.err.trim().split('\n').pop()!) as JsonError;
    expect(failure.error.code).toBe('max_store_below_reserved');
    // The DLQ's default 1 GiB alone does not fit in 8 MiB.
    expect(failure.error.details).toMatchObject({
      asked: 8 * MiB,
      reserved: 1024 * MiB,
      stored: null,
      required: 1024 * MiB,
      source: 'configured',
      unchecked: ['stored', 'other_streams', 'server_limits'],
    });
    expect(failure.error.details!.warnings!.map((w) => w.code)).toEqual(['max_store_unverified']);
    expect(failure.error.message).toContain('--allow-below-reserved');
    expect(existsSync(limitsFile())).toBe(false);

    // In words: the numbers, and the flag that overrides.
    const prose = await config({}, '--max-store', '8MiB');
    expect(prose.code).toBe(1);
    expect(prose.err).toContain(`--max-store ${8 * MiB} bytes is below what the account's streams need: ${1024 * MiB} bytes reserved`);
    expect(prose.err).toContain('could not be read (nothing accepts connections');

    // The services' settings with small limits: it fits; still said unverified (no server read).
    const ok = await config(SETTINGS, '--max-store', '8MiB', '--json');
    expect(ok.code).toBe(0);
    const summary = JSON.parse(ok.out) as Record<string, unknown>;
    expect(summary).toMatchObject({
      max_store: 8 * MiB,
      max_store_check: { asked: 8 * MiB, reserved: 3 * MiB, stored: null, required: 3 * MiB, source: 'configured' },
      running_server: null,
      apply: 'start',
      apply_command: `nats-server -c ${join(auth, 'nats-server.conf')}`,
    });
    expect(warningsOf(ok.err).map((w) => w.code)).toEqual(['max_store_unverified']);
    expect(JSON.parse(readFileSync(limitsFile(), 'utf8'))).toEqual({ max_store: 8 * MiB });
  }, 30_000);

  it('server running: checked against its streams (reserved + what the events store); --allow-below-reserved writes it with a warning; it says to reload the server, with its pid', async () => {
    server = await startNatsServer({ port, config: join(auth, 'nats-server.conf') });
    await connectAdmin();
    await provision(admin!.jsm, batonTopology(PREFIX, { dlqMaxBytes: 1 * MiB, inboxMaxBytes: 2 * MiB }));
    for (let i = 0; i < 12; i++) await admin!.js.publish(`${PREFIX}.ev.acme.run.r${i}`, new Uint8Array(256 * 1024));
    const events = (await admin!.jsm.streams.info(batonStreamNames(PREFIX).events)).state.bytes;
    expect(events).toBeGreaterThan(3 * MiB);

    // 5 MiB holds the 3 MiB reserved, not what the events stream stores on top.
    const refused = await config(SETTINGS, '--max-store', '5MiB', '--json');
    expect(refused.code).toBe(1);
    const failure = JSON.parse(refused.err.trim()) as JsonError;
    expect(failure.error).toMatchObject({
      code: 'max_store_below_reserved',
      details: { asked: 5 * MiB, reserved: 3 * MiB, stored: events, required: 3 * MiB + events, source: 'server', server_url: server.url, unchecked: [] },
    });
    // Read from the server: no warning that it was not.
    expect(failure.error.details!.warnings).toBeUndefined();
    expect(JSON.parse(readFileSync(limitsFile(), 'utf8'))).toEqual({ max_store: 8 * MiB });

    const forced = await config(SETTINGS, '--max-store', '5MiB', '--allow-below-reserved', '--json');
    expect(forced.code).toBe(0);
    expect(warningsOf(forced.err)).toEqual([
      expect.objectContaining({ code: 'max_store_below_reserved', details: expect.objectContaining({ required: 3 * MiB + events }) }),
    ]);
    expect(JSON.parse(forced.out)).toMatchObject({
      max_store: 5 * MiB,
      running_server: { url: server.url, pid: null, log: null },
      apply: 'reload',
      apply_command: 'nats-server --signal reload=<pid>',
    });
    // The override is for --max-store only.
    expect((await config(SETTINGS, '--allow-below-reserved')).code).toBe(2);

    // Enough: no warning at all; npm start's local.json names the server's pid: the command names it.
    writeFileSync(
      join(auth, 'local.json'),
      JSON.stringify({
        url: server.url,
        creds: { admin: join(auth, 'creds', 'admin.creds') },
        nats_server: { pid: server.child.pid, log: join(dir, 'nats.log') },
      }),
    );
    const enough = await config(SETTINGS, '--max-store', '64MiB', '--json');
    expect(enough.code).toBe(0);
    expect(enough.err).toBe('');
    expect(JSON.parse(enough.out)).toMatchObject({
      max_store: 64 * MiB,
      max_store_check: { reserved: 3 * MiB, stored: events, source: 'server' },
      running_server: { url: server.url, pid: server.child.pid, log: join(dir, 'nats.log') },
      apply: 'reload',
      apply_command: `nats-server --signal reload=${server.child.pid}`,
    });
    const prose = await config(SETTINGS);
    expect(prose.code).toBe(0);
    expect(prose.out).toContain(`reload it to apply this: nats-server --signal reload=${server.child.pid}`);
    expect(prose.out).not.toContain('start it with');
  }, 60_000);

  it('baton streams shows each stream`s max_bytes, discard policy and % used, and the account`s storage limit and usage', async () => {
    await server!.reload();
    const env = { NATS_URL: server!.url, NATS_CREDS: join(auth, 'creds', 'admin.creds') };
    const listed = await baton(env, 'streams', '--json');
    expect(listed.code).toBe(0);
    const streams = JSON.parse(listed.out) as Record<string, unknown>[];
    const byRole = Object.fromEntries(streams.map((s) => [s['role'], s]));
    const account = { limit: 64 * MiB, used: expect.any(Number), used_pct: expect.any(Number) };
    expect(byRole['events']).toMatchObject({ max_bytes: null, used_pct: null, discard: 'old', max_age_ms: null, replicas: 1, account });
    expect(byRole['inbox']).toMatchObject({ max_bytes: 2 * MiB, discard: 'new', used_pct: 0, max_age_ms: 30 * 24 * 3600 * 1000, account });
    expect(byRole['dlq']).toMatchObject({ max_bytes: 1 * MiB, discard: 'old', account });
    const used = (byRole['events'] as { account: { used: number } }).account.used;
    expect(used).toBeGreaterThanOrEqual((byRole['events'] as { bytes: number }).bytes);

    const text = await baton(env, 'streams');
    expect(text.out).toMatch(/MAX BYTES\s+USED\s+DISCARD/);
    expect(text.out).toContain(`account JetStream storage: ${used} bytes used, of ${64 * MiB} (`);
  }, 30_000);

  it('a full inbox: the CLI`s storage_full failure carries details.limit (and the subject)', async () => {
    const subject = `${PREFIX}.in.demo.start`;
    // nats-server 2.9 closed every client on the reload: connect again.
    await connectAdmin();
    // Filled to the last bytes: big messages, then smaller ones until even 16 bytes are refused.
    let n = 0;
    for (const size of [256 * 1024, 16 * 1024, 1024, 64, 16]) {
      for (let refused = false; !refused; ) {
        await admin!.js.publish(subject, new Uint8Array(size), { msgID: `fill-${n++}` }).catch(() => {
          refused = true;
        });
      }
    }
    const env = { NATS_URL: server!.url, NATS_CREDS: join(auth, 'creds', 'admin.creds') };
    const full = await baton(env, 'start', 'support', '--project', 'demo', '--run', 'full-1', '--json');
    expect(full.code).toBe(1);
    const failure = JSON.parse(full.err.trim().split('\n').pop()!) as JsonError;
    expect(failure.error).toMatchObject({ code: 'storage_full', details: { limit: 'stream_bytes', subject } });
    const listed = JSON.parse((await baton(env, 'streams', '--json')).out) as { role: string; used_pct: number }[];
    expect(listed.find((s) => s.role === 'inbox')!.used_pct).toBeGreaterThan(85);
  }, 30_000);
});
