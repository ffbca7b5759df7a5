import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AckPolicy, headers as natsHeaders, type StreamConfig, type StreamState } from 'nats';
import {
  acknowledgedThrough,
  batonStreamNames,
  batonTopology,
  connectNats,
  deploymentStreamNames,
  eventHeaders,
  headersFrom,
  headersToRecord,
  provision,
  restoreStream,
  snapshotStream,
  tokenRevocationStream,
  watchdogSnapshotHeadSubject,
  watchdogSnapshotStream,
  type NatsHandle,
} from '@baton/eventstore';
import { createEventRegistry, inboxPrefixOf, MsgIds, Subjects } from '@baton/contracts';
import { ApiTokenKeys } from '@baton/platform';
import { createProjectionStore, createRedis, foldScenario, scenarioEnvelope, scenarioSteps, type RedisHandle } from '@baton/projections';
// eslint-disable-next-line @nx/enforce-module-boundaries
import { freePort, startNatsServer, type PrivateNatsServer } from '../../../libs/eventstore/src/int/servers';
import { main } from './main';
import { bufferedIo } from './output';

/*
 * `baton backup` takes a running deployment's streams with JetStream's own snapshot API (consumers
 * included) and its API token records; `baton restore` puts them into an empty deployment (a new
 * nats-server after its storage was lost): every message equal (sequence, subject, headers, data),
 * a durable consumer's ack floor kept, the token records written back where none is. Both refuse
 * what would mix deployments: a non-empty backup folder, streams that exist, a corrupted file
 * (nothing restored). Two private nats-servers (A: the deployment, B: the new one); the shared
 * Redis under a prefix of its own.
 */

const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const prefix = `bk${randomBytes(5).toString('hex')}`;
const names = batonStreamNames(prefix);
const revocations = tokenRevocationStream(prefix);

let serverA: PrivateNatsServer;
let serverB: PrivateNatsServer;
let a: NatsHandle;
let b: NatsHandle;
let redis: RedisHandle;
let dir: string;
let backupDir: string;

async function baton(url: string, ...argv: string[]) {
  const io = bufferedIo(argv.includes('--tty'));
  argv = argv.filter((arg) => arg !== '--tty');
  const code = await main(argv, { io, env: { BATON_PREFIX: prefix, NATS_URL: url, REDIS_URL, BATON_NATS_DIR: join(dir, 'no-deployment') } });
  return { code, out: io.out(), err: io.err() };
}

const errorOf = (err: string) => (JSON.parse(err.trim().split('\n').at(-1) as string) as { error: { code: string; details?: Record<string, unknown> } }).error;

interface Seen {
  seq: number;
  subject: string;
  headers: Record<string, string[]>;
  data: string;
}

/** Every message of `stream`, by sequence (gaps skipped). */
async function messagesOf(nats: NatsHandle, stream: string): Promise<Seen[]> {
  const info = await nats.jsm.streams.info(stream);
  const seen: Seen[] = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
    const msg = await nats.jsm.streams.getMessage(stream, { seq });
    seen.push({ seq: msg.seq, subject: msg.subject, headers: headersToRecord(msg.header), data: Buffer.from(msg.data).toString('base64') });
  }
  return seen;
}

const tokenKeys = (id: string) => ApiTokenKeys.token(prefix, id);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'baton-backup-'));
  backupDir = join(dir, 'backup');
  serverA = await startNatsServer({ jetstream: true });
  serverB = await startNatsServer({ jetstream: true });
  a = await connectNats({ servers: serverA.url, name: 'backup-int-a' });
  b = await connectNats({ servers: serverB.url, name: 'backup-int-b' });
  redis = createRedis(REDIS_URL);

  // The deployment on A: Baton's streams (file storage, as the services make them), the revocation log.
  await provision(a.jsm, batonTopology(prefix));
  await a.jsm.streams.add({ name: revocations.name, subjects: revocations.subjects });
  for (let i = 1; i <= 25; i++) {
    const h = natsHeaders();
    h.set('Nats-Msg-Id', `ev-${i}`);
    h.set('baton-event-type', i % 2 === 0 ? 'run.started' : 'run.step_completed');
    h.set('traceparent', `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01`);
    await a.js.publish(`${prefix}.ev.acme.run.r${i % 4}`, new TextEncoder().encode(JSON.stringify({ i, body: randomBytes(48 * 1024).toString('base64') })), {
      headers: h,
    });
  }
  const letter = natsHeaders();
  letter.set('Baton-Dlq-Reason', 'poison');
  letter.set('Baton-Dlq-Source', 'router');
  await a.js.publish(`${prefix}.dlq.router`, new TextEncoder().encode('{"bad":true}'), { headers: letter });
  await a.js.publish(`${prefix}.in.acme.result.bob`, new TextEncoder().encode('{"result":1}'));
  await a.js.publish(`${revocations.subjects[0]!.replace('*', 'tok1')}`, new TextEncoder().encode('{"revoked":"tok1"}'));

  // A durable consumer that has acknowledged the first 10 events (and holds 2 more unacknowledged).
  await a.jsm.consumers.add(names.events, { durable_name: 'bk_reader', ack_policy: AckPolicy.Explicit, ack_wait: 60_000_000_000 });
  const consumer = await a.js.consumers.get(names.events, 'bk_reader');
  const batch = await consumer.fetch({ max_messages: 12, expires: 2000 });
  for await (const msg of batch) if (msg.seq <= 10) msg.ack();
  // Let the server record the acks before the snapshot.
  await a.connection.flush();
  for (let i = 0; i < 50 && (await a.jsm.consumers.info(names.events, 'bk_reader')).ack_floor.stream_seq < 10; i++) await new Promise((r) => setTimeout(r, 20));

  // Token records as the store keeps them (signed JSON text) and the id set.
  await redis.client.set(tokenKeys('tkaaaa'), '{"token_id":"tkaaaa","name":"ada","mac":"m1"}');
  await redis.client.set(tokenKeys('tkbbbb'), '{"token_id":"tkbbbb","name":"bob","mac":"m2"}');
  await redis.client.sadd(ApiTokenKeys.tokens(prefix), 'tkaaaa', 'tkbbbb');
}, 60_000);

afterAll(async () => {
  await a?.close();
  await b?.close();
  await serverA?.remove();
  await serverB?.remove();
  if (redis) {
    const keys = await redis.client.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.client.del(...keys);
    await redis.close();
  }
  rmSync(dir, { recursive: true, force: true });
});

describe('baton backup and baton restore (private nats-servers, real Redis)', () => {
  it('backs up every stream of the deployment that exists, with a manifest and the token records', async () => {
    const result = await baton(serverA.url, 'backup', '--out', backupDir, '--json');
    expect({ code: result.code, err: result.err }).toEqual({ code: 0, err: '' });
    const summary = JSON.parse(result.out) as {
      streams: Array<{ stream: string; messages: number; last_seq: number; bytes: number }>;
      absent_streams: string[];
      tokens: { file: string; records: number; ids: number };
    };
    expect(summary.streams.map((s) => s.stream).sort()).toEqual([names.events, names.inbox, names.dlq, revocations.name].sort());
    expect(summary.absent_streams).toEqual(deploymentStreamNames(prefix).filter((n) => n.endsWith('_WATCHDOG')));
    expect(summary.streams.find((s) => s.stream === names.events)).toMatchObject({ messages: 25, last_seq: 25 });
    // Random bodies do not compress: the events' snapshot spans many chunks (128 KiB each), each acknowledged.
    expect(summary.streams.find((s) => s.stream === names.events)!.bytes).toBeGreaterThan(1024 * 1024);
    expect(summary.tokens).toEqual({ file: 'tokens.json', records: 2, ids: 2 });
    expect(readdirSync(backupDir).sort()).toEqual(['manifest.json', 'tokens.json', ...summary.streams.map((s) => `${s.stream}.snapshot`)].sort());
    const manifest = JSON.parse(readFileSync(join(backupDir, 'manifest.json'), 'utf8')) as {
      format_version: number;
      prefix: string;
      streams: Array<{ stream: string; config: { name: string }; sha256: string }>;
      events_consumers_at_start: Record<string, number>;
    };
    expect(manifest).toMatchObject({ format_version: 1, prefix });
    // Where each reader of the events stream stood before the first stream was taken (bk_reader: acknowledged through 10, 2 pending).
    expect(manifest.events_consumers_at_start).toEqual({ bk_reader: 10 });
    expect(manifest.streams.every((s) => s.config.name === s.stream && /^[0-9a-f]{64}$/.test(s.sha256))).toBe(true);
    // The events stream is taken last: what the inbox's consumers had acknowledged has its events in it.
    expect(manifest.streams.map((s) => s.stream)).toEqual([names.inbox, names.dlq, revocations.name, names.events]);
    // Every context and customer message is in it: the admin's alone (DR drill F8).
    expect(statSync(backupDir).mode & 0o777).toBe(0o700);
    for (const file of readdirSync(backupDir)) expect({ file, mode: statSync(join(backupDir, file)).mode & 0o777 }).toEqual({ file, mode: 0o600 });
  }, 60_000);

  it("refuses to back up with Redis only defaulted (NATS_URL set, REDIS_URL not): the token records would be another deployment's or none (default_server_write), nothing written", async () => {
    const io = bufferedIo(false);
    const out = join(dir, 'defaulted-redis');
    const code = await main(['backup', '--out', out, '--json'], {
      io,
      env: { BATON_PREFIX: prefix, NATS_URL: serverA.url, BATON_NATS_DIR: join(dir, 'no-deployment') },
    });
    expect(code).toBe(2);
    const error = errorOf(io.err());
    expect(error.code).toBe('default_server_write');
    expect(existsSync(out)).toBe(false);
  }, 30_000);

  it('says on a terminal what it writes, stream by stream, with its bytes', async () => {
    const result = await baton(serverA.url, 'backup', '--out', join(dir, 'prose'), '--tty');
    expect(result.code).toBe(0);
    expect(result.err).toMatch(
      new RegExp(`backup ${names.events}: 25 messages \\(seq 1-25\\), [0-9 ]+ bytes \\([0-9.]+ MiB\\) -> ${names.events}\\.snapshot\n`),
    );
    expect(result.err).toContain('backup tokens: 2 records, 2 ids -> tokens.json');
    expect(result.out).toContain(`backed up 4 streams and 2 token records into ${join(dir, 'prose')}`);
  }, 60_000);

  it('refuses a non-empty --out folder (backup_dir_not_empty) and writes nothing there', async () => {
    const before = readdirSync(backupDir).sort();
    const result = await baton(serverA.url, 'backup', '--out', backupDir, '--json');
    expect(result.code).toBe(1);
    expect(errorOf(result.err)).toMatchObject({ code: 'backup_dir_not_empty', details: { dir: backupDir } });
    expect(readdirSync(backupDir).sort()).toEqual(before);
  });

  it('refuses a backup with a corrupted file (backup_corrupt, naming it): nothing is restored', async () => {
    const broken = join(dir, 'broken');
    cpSync(backupDir, broken, { recursive: true });
    const file = join(broken, `${names.dlq}.snapshot`);
    const bytes = readFileSync(file);
    bytes[Math.floor(bytes.length / 2)] = (bytes[Math.floor(bytes.length / 2)] as number) ^ 0xff;
    writeFileSync(file, bytes);
    const result = await baton(serverB.url, 'restore', '--from', broken, '--json');
    expect(result.code).toBe(1);
    expect(errorOf(result.err)).toMatchObject({ code: 'backup_corrupt', details: { file: `${names.dlq}.snapshot`, reason: 'sha256' } });
    const streams: string[] = [];
    for await (const name of b.jsm.streams.names()) streams.push(name);
    expect(streams).toEqual([]);
  }, 30_000);

  it('restores into an empty nats-server: every message equal, the durable consumer`s ack floor kept, the token records written back without overwriting', async () => {
    // Redis lost one record and the id set; another record changed since the backup: it stays as it is.
    await redis.client.del(tokenKeys('tkaaaa'), ApiTokenKeys.tokens(prefix));
    await redis.client.set(tokenKeys('tkbbbb'), '{"token_id":"tkbbbb","name":"bob","mac":"changed"}');

    const result = await baton(serverB.url, 'restore', '--from', backupDir, '--json');
    expect({ code: result.code, err: result.err }).toEqual({ code: 0, err: '' });
    expect(JSON.parse(result.out)).toMatchObject({ prefix, tokens: { records: 2, restored: 1, kept: 1, ids: 2 } });

    for (const stream of [names.events, names.inbox, names.dlq, revocations.name]) {
      const before = await messagesOf(a, stream);
      expect(before.length).toBeGreaterThan(0);
      expect(await messagesOf(b, stream)).toEqual(before);
    }
    // The restored stream keeps its creation time (its server never restarted): the identity projections record of the stream they were built from.
    expect((await b.jsm.streams.info(names.events)).created).toBe((await a.jsm.streams.info(names.events)).created);
    const restored = await b.jsm.consumers.info(names.events, 'bk_reader');
    const original = await a.jsm.consumers.info(names.events, 'bk_reader');
    expect(restored.ack_floor.stream_seq).toBe(10);
    expect(restored.ack_floor.stream_seq).toBe(original.ack_floor.stream_seq);
    expect(restored.config.durable_name).toBe('bk_reader');
    // The restored consumer goes on from where it was: the next message it delivers is past the floor.
    const next = await (await b.js.consumers.get(names.events, 'bk_reader')).next({ expires: 2000 });
    expect(next?.seq).toBeGreaterThan(10);

    expect(await redis.client.get(tokenKeys('tkaaaa'))).toBe('{"token_id":"tkaaaa","name":"ada","mac":"m1"}');
    expect(await redis.client.get(tokenKeys('tkbbbb'))).toBe('{"token_id":"tkbbbb","name":"bob","mac":"changed"}');
    expect((await redis.client.smembers(ApiTokenKeys.tokens(prefix))).sort()).toEqual(['tkaaaa', 'tkbbbb']);
  }, 60_000);

  it('refuses to restore over streams that exist (stream_exists, naming them): nothing changes', async () => {
    const h = natsHeaders();
    h.set('Nats-Msg-Id', 'after-restore');
    await b.js.publish(`${prefix}.ev.acme.run.r9`, new TextEncoder().encode('{"after":true}'), { headers: h });
    const before = await messagesOf(b, names.events);
    const result = await baton(serverB.url, 'restore', '--from', backupDir, '--json');
    expect(result.code).toBe(1);
    const error = errorOf(result.err);
    expect(error.code).toBe('stream_exists');
    expect((error.details?.['streams'] as string[]).sort()).toEqual([names.events, names.inbox, names.dlq, revocations.name].sort());
    expect(error.details?.['empty']).toBe(false);
    // --replace-empty never deletes a stream that holds messages.
    const replacing = await baton(serverB.url, 'restore', '--from', backupDir, '--replace-empty', '--json');
    expect(errorOf(replacing.err)).toMatchObject({ code: 'stream_exists', details: { empty: false } });
    expect(await messagesOf(b, names.events)).toEqual(before);
    expect(existsSync(backupDir)).toBe(true);
  }, 30_000);

  it('backs up while events are appended: each stream is restored as it was at its snapshot, a prefix of the live one', async () => {
    const live = join(dir, 'live');
    let writing = true;
    let written = 0;
    const writer = (async () => {
      while (writing) {
        await a.js.publish(`${prefix}.ev.acme.run.live`, new TextEncoder().encode(JSON.stringify({ n: ++written })));
      }
    })();
    const result = await baton(serverA.url, 'backup', '--out', live, '--json');
    writing = false;
    await writer;
    expect({ code: result.code, err: result.err }).toEqual({ code: 0, err: '' });
    const events = (JSON.parse(result.out) as { streams: Array<{ stream: string; messages: number; last_seq: number }> }).streams.find(
      (s) => s.stream === names.events,
    )!;

    const serverC = await startNatsServer({ jetstream: true });
    const c = await connectNats({ servers: serverC.url, name: 'backup-int-c' });
    try {
      // The token records are there already (kept): only the streams are new.
      const restored = await baton(serverC.url, 'restore', '--from', live, '--json');
      expect({ code: restored.code, err: restored.err }).toEqual({ code: 0, err: '' });
      const got = await messagesOf(c, names.events);
      // The state the manifest records is the server's as the snapshot began; what was appended while
      // the server read the stream may be in the snapshot too, past it, and is counted.
      const row = (JSON.parse(restored.out) as { streams: Array<{ stream: string; messages: number; appended_during_backup: number }> }).streams.find(
        (s) => s.stream === names.events,
      )!;
      expect(got.length).toBe(events.messages + row.appended_during_backup);
      expect(row.messages).toBe(got.length);
      expect(got[events.messages - 1]?.seq).toBe(events.last_seq);
      expect(got.at(-1)?.seq).toBe(events.last_seq + row.appended_during_backup);
      const original = await messagesOf(a, names.events);
      expect(original.length).toBeGreaterThanOrEqual(got.length);
      expect(original.slice(0, got.length)).toEqual(got);
    } finally {
      await c.close();
      await serverC.remove();
    }
  }, 60_000);

  it('says when a restored stream is not what the manifest says (restore_mismatch), naming it', async () => {
    const edited = join(dir, 'edited');
    cpSync(backupDir, edited, { recursive: true });
    const manifest = JSON.parse(readFileSync(join(edited, 'manifest.json'), 'utf8')) as { streams: Array<{ stream: string; state: { messages: number } }> };
    manifest.streams.find((s) => s.stream === names.dlq)!.state.messages += 1;
    writeFileSync(join(edited, 'manifest.json'), JSON.stringify(manifest));
    const serverD = await startNatsServer({ jetstream: true });
    try {
      const result = await baton(serverD.url, 'restore', '--from', edited, '--json');
      expect(result.code).toBe(1);
      expect(errorOf(result.err)).toMatchObject({
        code: 'restore_mismatch',
        details: { stream: names.dlq, expected: { messages: 2 }, actual: { messages: 1 } },
      });
      // A restore puts every stream back or none: what it restored before the mismatch was deleted again (DR drill F7).
      const rolledBack = errorOf(result.err).details?.['rolled_back'] as string[];
      expect(rolledBack).toEqual([names.inbox, names.dlq]);
      const d = await connectNats({ servers: serverD.url, name: 'backup-int-d' });
      try {
        const left: string[] = [];
        for await (const info of d.jsm.streams.list()) left.push(info.config.name);
        expect(left).toEqual([]);
      } finally {
        await d.close();
      }
    } finally {
      await serverD.remove();
    }
  }, 60_000);

  it('a reader of the events stream that acknowledged more while the backup ran than when it began is made again from where it stood: it reads those events again (what it published into the streams taken before may be missing)', async () => {
    // As if bk_reader had acknowledged through 4 when the backup began, and through 10 by the time the events stream was taken.
    const edited = join(dir, 'rewind');
    cpSync(backupDir, edited, { recursive: true });
    const manifest = JSON.parse(readFileSync(join(edited, 'manifest.json'), 'utf8')) as { events_consumers_at_start: Record<string, number> };
    expect(manifest.events_consumers_at_start).toEqual({ bk_reader: 10 });
    manifest.events_consumers_at_start = { bk_reader: 4 };
    writeFileSync(join(edited, 'manifest.json'), JSON.stringify(manifest));
    const serverR = await startNatsServer({ jetstream: true });
    const r = await connectNats({ servers: serverR.url, name: 'backup-int-r' });
    try {
      const restored = await baton(serverR.url, 'restore', '--from', edited, '--json');
      expect({ code: restored.code, err: restored.err }).toEqual({ code: 0, err: '' });
      const rows = (JSON.parse(restored.out) as { streams: Array<{ stream: string; consumers_realigned: unknown[] }> }).streams;
      expect(rows.find((row) => row.stream === names.events)?.consumers_realigned).toEqual([
        expect.objectContaining({ consumer: 'bk_reader', ack_floor: 10, start_seq: 5, reason: 'rewound' }),
      ]);
      const next = await (await r.js.consumers.get(names.events, 'bk_reader')).next({ expires: 2_000 });
      expect(next?.seq).toBe(5);
    } finally {
      await r.close();
      await serverR.remove();
    }
  }, 60_000);

  it('restores over the empty streams services started too early made, with --replace-empty (stop the services first); without it stream_exists says they are empty', async () => {
    const serverE = await startNatsServer({ jetstream: true });
    const e = await connectNats({ servers: serverE.url, name: 'backup-int-e' });
    try {
      // What the services make at start: the streams, empty.
      await provision(e.jsm, batonTopology(prefix));
      const refused = await baton(serverE.url, 'restore', '--from', backupDir, '--json');
      expect(errorOf(refused.err)).toMatchObject({ code: 'stream_exists', details: { empty: true } });
      expect(JSON.parse(refused.err.trim().split('\n').at(-1) as string).error.message).toContain('--replace-empty');
      const restored = await baton(serverE.url, 'restore', '--from', backupDir, '--replace-empty', '--json');
      expect({ code: restored.code, err: restored.err }).toEqual({ code: 0, err: '' });
      expect(await messagesOf(e, names.events)).toEqual(await messagesOf(a, names.events).then((all) => all.slice(0, 25)));
    } finally {
      await e.close();
      await serverE.remove();
    }
  }, 60_000);

  it('a durable the snapshot holds as past its stream`s end (read on while the backup ran) is made again from its floor: what the restored stream is given next reaches it', async () => {
    // The fixture: a snapshot of BKFIX_DLQ (the deployment "bkfix") whose durable `ahead` had
    // delivered past the stream's last snapshotted message (libs/eventstore/src/int/fixtures).
    const fixtures = join(__dirname, '..', '..', '..', 'libs', 'eventstore', 'src', 'int', 'fixtures');
    const fixture = JSON.parse(readFileSync(join(fixtures, 'consumer-ahead.json'), 'utf8')) as { config: StreamConfig; state: StreamState };
    const run = async (url: string, ...argv: string[]) => {
      const io = bufferedIo(false);
      const code = await main(argv, { io, env: { BATON_PREFIX: 'bkfix', NATS_URL: url, REDIS_URL, BATON_NATS_DIR: join(dir, 'no-deployment') } });
      return { code, out: io.out(), err: io.err() };
    };
    const serverG = await startNatsServer({ jetstream: true });
    const serverH = await startNatsServer({ jetstream: true });
    const g = await connectNats({ servers: serverG.url, name: 'backup-int-g' });
    const h = await connectNats({ servers: serverH.url, name: 'backup-int-h' });
    try {
      await restoreStream(
        g,
        'BKFIX_DLQ',
        fixture,
        (async function* () {
          yield readFileSync(join(fixtures, 'consumer-ahead.snapshot'));
        })(),
      );
      const ahead = await g.jsm.consumers.info('BKFIX_DLQ', 'ahead');
      // A backup needs the deployment's events stream; empty here.
      await g.jsm.streams.add({ name: 'BKFIX_EVENTS', subjects: ['bkfix.ev.>'] });
      const out = join(dir, 'ahead');
      const backedUp = await run(serverG.url, 'backup', '--out', out, '--json');
      expect({ code: backedUp.code, err: backedUp.err }).toEqual({ code: 0, err: '' });

      const restored = await run(serverH.url, 'restore', '--from', out, '--json');
      expect({ code: restored.code, err: restored.err }).toEqual({ code: 0, err: '' });
      const last = (await h.jsm.streams.info('BKFIX_DLQ')).state.last_seq;
      const start = Math.min(acknowledgedThrough(ahead), last) + 1;
      const row = (JSON.parse(restored.out) as { streams: Array<{ stream: string; consumers_realigned: unknown[] }> }).streams.find(
        (r) => r.stream === 'BKFIX_DLQ',
      );
      expect(row?.consumers_realigned).toEqual([
        {
          consumer: 'ahead',
          delivered: ahead.delivered.stream_seq,
          ack_floor: ahead.ack_floor.stream_seq,
          stream_last_seq: last,
          start_seq: start,
          reason: 'ahead',
        },
      ]);
      // The next letter the restored stream is given reaches the consumer (left as restored, never).
      expect((await h.js.publish('bkfix.dlq.router', new TextEncoder().encode('{"after_restore":true}'))).seq).toBe(last + 1);
      const consumer = await h.js.consumers.get('BKFIX_DLQ', 'ahead');
      const seen: number[] = [];
      for (let i = start; i <= last + 1; i++) {
        const msg = await consumer.next({ expires: 2_000 });
        if (msg === null) break;
        seen.push(msg.seq);
        msg.ack();
      }
      expect(seen.at(-1)).toBe(last + 1);
    } finally {
      await g.close();
      await h.close();
      await serverG.remove();
      await serverH.remove();
    }
  }, 60_000);
});

describe('a backup of a stream whose server restarted since it was made (DR drill F4)', () => {
  it('restores with another creation time, and what recorded the old identity and holds no more than the stream takes the new one (stream_identity_changed says what)', async () => {
    const before = (await a.jsm.streams.info(names.events)).created;
    const lastSeq = (await a.jsm.streams.info(names.events)).state.last_seq;
    // The watchdog's saved snapshot of this stream (a head naming its chunk), as the watchdog writes it.
    const wd = watchdogSnapshotStream(prefix);
    await a.jsm.streams.add({ name: wd.name, subjects: wd.subjects, max_msgs_per_subject: 1 });
    const chunk = await a.js.publish(`${prefix}.wd.chunk.ab12.0`, new Uint8Array([1, 2, 3]));
    const head = {
      fingerprint: 'fp-1',
      events_stream: names.events,
      events_created: before,
      through_seq: lastSeq - 2,
      taken_at: new Date().toISOString(),
      by: 'watchdog-1',
      gen: 'ab12',
      chunks: [chunk.seq],
      bytes: 3,
      sha256: 'x',
    };
    await a.js.publish(watchdogSnapshotHeadSubject(prefix), new TextEncoder().encode(JSON.stringify(head)));
    // Projections kept in Redis (it survived): runs built from this stream, stops from it but past
    // its end (events the restore lacks), inbox from another stream; the others have none.
    const store = createProjectionStore({ redis: redis.client, prefix: `${prefix}:proj` });
    for (const name of ['runs', 'stops', 'inbox']) await store.ensureActive({ name, version: 1 });
    const meta = async (name: string) => `${prefix}:proj:${name}:g${await store.activeGeneration(name)}:~meta`;
    await redis.client.hset(await meta('runs'), 'seq', String(lastSeq), 'stream', before);
    await redis.client.hset(await meta('stops'), 'seq', String(lastSeq + 5), 'stream', before);
    await redis.client.hset(await meta('inbox'), 'seq', '3', 'stream', 'another-stream');
    await serverA.stop();
    await serverA.start();
    // The client reconnects by itself; the running server still reports the stream's first creation time.
    let info = await a.jsm.streams.info(names.events).catch(() => null);
    for (const since = Date.now(); info === null && Date.now() - since < 15_000; info = await a.jsm.streams.info(names.events).catch(() => null))
      await new Promise((r) => setTimeout(r, 100));
    expect(info?.created).toBe(before);
    const out = join(dir, 'after-restart');
    const backup = await baton(serverA.url, 'backup', '--out', out, '--json');
    expect({ code: backup.code, err: backup.err }).toEqual({ code: 0, err: '' });
    const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8')) as { streams: Array<{ stream: string; created?: string }> };
    expect(manifest.streams.find((s) => s.stream === names.events)?.created).toBe(before);

    const serverG = await startNatsServer({ jetstream: true });
    const g = await connectNats({ servers: serverG.url, name: 'backup-int-g' });
    try {
      const restored = await baton(serverG.url, 'restore', '--from', out, '--json');
      expect(restored.code).toBe(0);
      const restoredCreated = (await g.jsm.streams.info(names.events)).created;
      expect(restoredCreated).not.toBe(before);
      const warnings = (
        JSON.parse(restored.err.trim()) as {
          warnings: Array<{ code: string; details: { streams: Array<{ stream: string; backed_up: string; restored: string }> } }>;
        }
      ).warnings;
      const identity = {
        stream: names.events,
        backed_up: before,
        restored: restoredCreated,
        watchdog_snapshot: { outcome: 'adopted', throughSeq: lastSeq - 2 },
        projections: {
          inbox: { outcome: 'other_stream', stream: 'another-stream' },
          stops: { outcome: 'ahead', lastSeq: lastSeq + 5 },
          handoffs: { outcome: 'no_generation' },
          runs: { outcome: 'adopted', generation: await store.activeGeneration('runs') },
          notices: { outcome: 'no_generation' },
        },
      };
      expect(warnings).toEqual([
        expect.objectContaining({
          code: 'stream_identity_changed',
          details: { streams: expect.arrayContaining([{ stream: names.events, backed_up: before, restored: restoredCreated }]), ...identity },
        }),
      ]);
      expect((JSON.parse(restored.out) as { stream_identity: unknown }).stream_identity).toEqual(identity);
      const message = (warnings[0] as unknown as { message: string }).message;
      expect(message).toContain('projection inbox (other_stream');
      expect(message).toContain('projection stops (ahead');
      expect(message).not.toContain('projection runs');
      // The watchdog's head now names the restored stream's identity, its fold unchanged.
      const restoredHead = await g.jsm.streams.getMessage(wd.name, { last_by_subj: watchdogSnapshotHeadSubject(prefix) });
      expect(JSON.parse(new TextDecoder().decode(restoredHead.data))).toEqual({ ...head, events_created: restoredCreated });
      // Only runs took it: the notifier would rebuild stops (ahead) and inbox (another stream) as before.
      expect(await redis.client.hget(await meta('runs'), 'stream')).toBe(restoredCreated);
      expect(await redis.client.hget(await meta('stops'), 'stream')).toBe(before);
      expect(await redis.client.hget(await meta('inbox'), 'stream')).toBe('another-stream');
    } finally {
      await g.close();
      await serverG.remove();
    }
  }, 90_000);
});

describe('who may take a backup, on a nats-server with Baton`s authentication (baton nats-config)', () => {
  let server: PrivateNatsServer | undefined;
  let auth: string;
  const handles: NatsHandle[] = [];

  async function batonAuth(env: Record<string, string>, ...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, { io, env: { BATON_PREFIX: prefix, BATON_NATS_DIR: auth, REDIS_URL, ...env } });
    return { code, out: io.out(), err: io.err() };
  }

  afterAll(async () => {
    for (const handle of handles) await handle.close().catch(() => undefined);
    await server?.remove();
  });

  it('the admin`s credentials may snapshot the streams; an agent`s may not (permission_denied), nor ask the snapshot API itself', async () => {
    auth = join(dir, 'nats-auth');
    const port = await freePort();
    const configured = await batonAuth({}, 'nats-config', '--listen', `127.0.0.1:${port}`, '--store-dir', join(dir, 'js-auth'), '--json');
    expect(configured.code).toBe(0);
    server = await startNatsServer({ port, config: (JSON.parse(configured.out) as { server_config: string }).server_config });
    const adminCreds = join(auth, 'creds', 'admin.creds');
    const admin = await connectNats({
      servers: server.url,
      credsFile: adminCreds,
      inboxPrefix: inboxPrefixOf(prefix, { kind: 'op', relay: 'admin' }),
      name: 'backup-int-admin',
    });
    handles.push(admin);
    await provision(admin.jsm, batonTopology(prefix));
    await admin.js.publish(`${prefix}.ev.acme.run.r1`, new TextEncoder().encode('{"i":1}'));

    const ok = await batonAuth({ NATS_URL: server.url, NATS_CREDS: adminCreds }, 'backup', '--out', join(dir, 'auth-backup'), '--json');
    expect({ code: ok.code, err: ok.err }).toEqual({ code: 0, err: '' });
    expect((JSON.parse(ok.out) as { streams: Array<{ stream: string; messages: number }> }).streams.find((s) => s.stream === names.events)?.messages).toBe(1);

    const issued = await batonAuth({}, 'creds', 'agent', '--project', 'acme', '--agent', 'bob', '--json');
    expect(issued.code).toBe(0);
    const agentCreds = (JSON.parse(issued.out) as { file: string }).file;
    const refused = await batonAuth({ NATS_URL: server.url, NATS_CREDS: agentCreds }, 'backup', '--out', join(dir, 'agent-backup'), '--json');
    expect(refused.code).toBe(1);
    expect(errorOf(refused.err).code).toBe('permission_denied');
    expect(existsSync(join(dir, 'agent-backup'))).toBe(false);

    const agent = await connectNats({
      servers: server.url,
      credsFile: agentCreds,
      inboxPrefix: inboxPrefixOf(prefix, { kind: 'agent', project: 'acme', agent: 'bob' }),
      name: 'backup-int-agent',
      checkJetStream: false,
    });
    handles.push(agent);
    await expect(snapshotStream(agent, names.events, { onChunk: () => undefined, timeoutMs: 2000 })).rejects.toMatchObject({ code: 'snapshot_failed' });
  }, 60_000);
});

describe('after a restore, the projections rebuilt from the restored events match them (baton replay, baton verify)', () => {
  const prefix2 = `bkp${randomBytes(5).toString('hex')}`;
  let source: PrivateNatsServer | undefined;
  let target: PrivateNatsServer | undefined;
  let from: NatsHandle | undefined;

  const batonAt = async (url: string, ...argv: string[]) => {
    const io = bufferedIo();
    const code = await main(argv, { io, env: { BATON_PREFIX: prefix2, NATS_URL: url, REDIS_URL, BATON_NATS_DIR: join(dir, 'no-deployment') } });
    return { code, out: io.out(), err: io.err() };
  };

  afterAll(async () => {
    await from?.close();
    await source?.remove();
    await target?.remove();
    const keys = await redis.client.keys(`${prefix2}:*`);
    if (keys.length > 0) await redis.client.del(...keys);
  });

  it('restores Baton`s own events and the projections rebuilt from them verify', async () => {
    source = await startNatsServer({ jetstream: true });
    target = await startNatsServer({ jetstream: true });
    from = await connectNats({ servers: source.url, name: 'backup-int-source' });
    await provision(from.jsm, batonTopology(prefix2));
    // The example scenario, in three projects, as the event store stores it.
    const registry = createEventRegistry();
    const template = foldScenario(scenarioSteps({ project: 'zzz' }));
    for (const project of ['p0', 'p1', 'p2']) {
      for (const [index, e] of template.entries()) {
        const stored = scenarioEnvelope(registry, e, `ev-${index}`, project);
        const envelope = { ...stored, payload: JSON.parse(JSON.stringify(stored.payload).split('"zzz"').join(`"${project}"`)) as unknown };
        await from.js.publish(Subjects.aggregate(prefix2, project, e.aggregate, e.id), new TextEncoder().encode(JSON.stringify(envelope)), {
          msgID: MsgIds.event(project, e.aggregate, e.id, envelope.id),
          headers: headersFrom(eventHeaders(registry, envelope.type, envelope.version)),
        });
      }
    }
    const out = join(dir, 'scenario');
    expect((await batonAt(source.url, 'backup', '--out', out, '--json')).code).toBe(0);
    const restored = await batonAt(target.url, 'restore', '--from', out, '--json');
    expect({ code: restored.code, err: restored.err }).toEqual({ code: 0, err: '' });

    const replay = await batonAt(target.url, 'replay', '--json');
    expect(replay.code).toBe(0);
    const outcomes = JSON.parse(replay.out) as Array<{ projection: string; status: string; last_seq: number }>;
    expect(outcomes.length).toBeGreaterThan(0);
    expect(outcomes.every((o) => o.status === 'swapped' && o.last_seq === template.length * 3)).toBe(true);
    const verify = await batonAt(target.url, 'verify', '--json');
    expect({ code: verify.code }).toEqual({ code: 0 });
  }, 120_000);
});
