import { createHash } from 'node:crypto';
import { createReadStream, readFileSync } from 'node:fs';
import { mkdir, open, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import {
  batonStreamNames,
  deploymentStreamNames,
  jsErrCode,
  JsErrCode,
  acknowledgedThrough,
  realignRestoredConsumers,
  type RealignedConsumer,
  restampWatchdogSnapshot,
  restoreStream,
  snapshotStream,
  StreamNotFound,
  StreamSnapshotError,
  StreamSnapshotErrorCode,
  type SnapshotRestamp,
  type NatsHandle,
} from '@baton/eventstore';
import { ApiTokenKeys } from '@baton/platform';
import { restampEventsStream, type RestampOutcome } from '@baton/projections';
import type { Command } from '../command';
import { flag, parseCommandArgs, required } from '../command';
import type { CliContext } from '../context';
import { CliError, CliErrorCode, CliWarningCode, ExitCode, streamReadError } from '../errors';
import { printJson, type CliIo } from '../output';
import { formatCount, progressIo } from '../progress';

/*
 * `baton backup` and `baton restore`: a deployment's JetStream streams (the events stream is the
 * history; the projections in Redis are rebuilt from it) taken with JetStream's own snapshot API,
 * consumers included, and the operator API token records, which no stream holds (docs/sre.md,
 * "Back up and restore a deployment").
 */

/** The manifest's format; a restore refuses any other. */
export const BACKUP_FORMAT_VERSION = 1;
export const MANIFEST_FILE = 'manifest.json';
export const TOKENS_FILE = 'tokens.json';

const FileEntrySchema = z.object({
  file: z.string().regex(/^[A-Za-z0-9_.-]+$/),
  bytes: z.number().int().nonnegative(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});

const ManifestStreamSchema = FileEntrySchema.extend({
  stream: z.string().regex(/^[A-Za-z0-9_-]+$/),
  /**
   * The stream's creation time as the server reported it when the backup was taken: the identity the
   * projections and the watchdog's snapshots record. Absent in a backup made before it was kept.
   */
  created: z.string().optional(),
  config: z.record(z.string(), z.unknown()),
  state: z.object({
    messages: z.number().int().nonnegative(),
    bytes: z.number().int().nonnegative(),
    first_seq: z.number().int().nonnegative(),
    last_seq: z.number().int().nonnegative(),
    consumer_count: z.number().int().nonnegative().optional(),
  }),
});

export const BackupManifestSchema = z.object({
  format_version: z.literal(BACKUP_FORMAT_VERSION),
  baton_version: z.string().nullable(),
  prefix: z.string().min(1),
  created_at: z.string(),
  streams: z.array(ManifestStreamSchema),
  /** The streams of the deployment that did not exist when the backup was taken. */
  absent_streams: z.array(z.string()),
  /**
   * Per durable consumer of the events stream, the sequence it had acknowledged through when the
   * backup began, before the first stream was taken: what it acknowledged after that may have
   * published into the streams taken before the events stream (an offer into the inbox) after they
   * were taken. Absent in a backup made before it was kept.
   */
  events_consumers_at_start: z.record(z.string(), z.number().int().nonnegative()).optional(),
  tokens: FileEntrySchema.extend({ records: z.number().int().nonnegative(), ids: z.number().int().nonnegative() }),
});
export type BackupManifest = z.infer<typeof BackupManifestSchema>;

const TokensFileSchema = z.object({
  prefix: z.string(),
  /** The members of `<prefix>:auth:tokens`. */
  ids: z.array(z.string()),
  /** Every `<prefix>:auth:token:<id>` key, its value as stored (a signed record's JSON text). */
  records: z.array(z.object({ token_id: z.string().min(1), value: z.string() })),
});
type TokensFile = z.infer<typeof TokensFileSchema>;

/** The version of this baton (the workspace's package.json, found upwards of this file), or null when it cannot be read. */
function batonVersion(): string | null {
  for (let dir = __dirname, up = 0; up < 6; dir = join(dir, '..'), up++) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (typeof pkg.version === 'string' && pkg.name === 'baton') return pkg.version;
    } catch {
      // not there: the next
    }
  }
  return null;
}

const sha256 = (data: Uint8Array | string) => createHash('sha256').update(data).digest('hex');

/** A byte count as people read it: `12 345 bytes (12.1 KiB)`. */
function bytesText(n: number): string {
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = n;
  let unit = '';
  for (const u of units) {
    if (value < 1024) break;
    value /= 1024;
    unit = u;
  }
  return unit === '' ? `${formatCount(n)} bytes` : `${formatCount(n)} bytes (${value.toFixed(1)} ${unit})`;
}

/** One stream's progress line: redrawn in place on a terminal, else a line when it ends. */
function byteProgress(io: CliIo, label: string) {
  let last = 0;
  let drawn = false;
  return {
    update(bytes: number) {
      if (!io.stderrIsTTY) return;
      const now = Date.now();
      if (now - last < 100) return;
      last = now;
      drawn = true;
      io.stderr.write(`\r\x1b[2K${label}: ${bytesText(bytes)}`);
    },
    finish(text: string) {
      if (io.stderrIsTTY && drawn) io.stderr.write('\r\x1b[2K');
      io.stderr.write(`${label}: ${text}\n`);
    },
    abandon() {
      if (io.stderrIsTTY && drawn) io.stderr.write('\n');
    },
  };
}

/** How many messages `stream` holds, or null when there is no such stream (a read failure other than "not found" is the CLI's typed read error). */
async function streamMessages(ctx: CliContext, nats: NatsHandle, stream: string): Promise<number | null> {
  return (await streamInfo(ctx, nats, stream))?.state.messages ?? null;
}

/** The stream's info, or null when there is no such stream (a read failure other than "not found" is the CLI's typed read error). */
async function streamInfo(ctx: CliContext, nats: NatsHandle, stream: string): Promise<Awaited<ReturnType<NatsHandle['jsm']['streams']['info']>> | null> {
  try {
    return await nats.jsm.streams.info(stream);
  } catch (error) {
    if (error instanceof StreamNotFound || jsErrCode(error) === JsErrCode.streamNotFound) return null;
    throw streamReadError(error, stream, ctx.config().BATON_PREFIX, ctx.natsUrl());
  }
}

/** Delete `stream` (one that is gone already counts as deleted). */
async function deleteStream(ctx: CliContext, nats: NatsHandle, stream: string): Promise<void> {
  try {
    await nats.jsm.streams.delete(stream);
  } catch (error) {
    if (error instanceof StreamNotFound || jsErrCode(error) === JsErrCode.streamNotFound) return;
    throw streamReadError(error, stream, ctx.config().BATON_PREFIX, ctx.natsUrl());
  }
}

/** Delete the streams a failed restore made; returns those deleted (one that cannot be is left, and not named). */
async function rollBack(ctx: CliContext, nats: NatsHandle, streams: readonly string[]): Promise<string[]> {
  const deleted: string[] = [];
  for (const stream of streams) {
    try {
      await deleteStream(ctx, nats, stream);
      deleted.push(stream);
    } catch {
      // NATS went away under the restore: the failure itself says so; the stream stays, and a rerun says stream_exists.
    }
  }
  return deleted;
}

/** The token records of `prefix` as Redis holds them: every record key (SCAN) and the id set. */
async function readTokens(ctx: CliContext, prefix: string): Promise<TokensFile> {
  const redis = (await ctx.redis()).client;
  const keyOf = (id: string) => ApiTokenKeys.token(prefix, id);
  const stem = keyOf('');
  const ids = (await redis.smembers(ApiTokenKeys.tokens(prefix))).sort();
  const keys = new Set<string>();
  let cursor = '0';
  do {
    const [nextCursor, found] = await redis.scan(cursor, 'MATCH', `${stem.replace(/[*?[\]\\]/g, '\\$&')}*`, 'COUNT', 1000);
    cursor = nextCursor;
    for (const key of found) keys.add(key);
  } while (cursor !== '0');
  const records: TokensFile['records'] = [];
  for (const key of [...keys].sort()) {
    const value = await redis.get(key);
    if (value !== null) records.push({ token_id: key.slice(stem.length), value });
  }
  return { prefix, ids, records };
}

/**
 * The order the streams are snapshotted in, one after another: the events stream last. A consumer
 * of the inbox or the DLQ appends the events a message leads to before it acknowledges the message,
 * so whatever the inbox's consumers had acknowledged when the inbox was taken has its events in the
 * events stream taken after it (a message acknowledged in between is delivered again after a
 * restore, and its command is found already applied); the watchdog's snapshot names an events
 * sequence the events stream taken after it holds.
 */
export function backupOrder(prefix: string): string[] {
  const events = batonStreamNames(prefix).events;
  return [...deploymentStreamNames(prefix).filter((name) => name !== events), events];
}

export const backupCommand: Command = {
  name: 'backup',
  summary: "back up the deployment: its JetStream streams (JetStream's snapshots, consumers included) and the API token records, into a new folder",
  help: `Usage: baton backup --out <dir> [--json]

Back up the deployment of BATON_PREFIX while it runs: every stream of it that exists
(<PREFIX>_EVENTS, _INBOX, _DLQ, _WATCHDOG, _TOKEN_REVOCATIONS) is snapshotted with JetStream's own
snapshot API, consumers included (durable consumers keep their positions), into
<dir>/<STREAM>.snapshot, as the server sends it; the operator API token records (Redis
<PREFIX>:auth:token:<id>, signed, and the set <PREFIX>:auth:tokens) into <dir>/tokens.json; and
<dir>/manifest.json: the format, this baton's version, the prefix, when, and per stream its config,
its state (messages, bytes, first_seq, last_seq), its file's size and sha256; and where each durable
consumer of the events stream stood when the backup began (events_consumers_at_start: restore makes
a reader that acknowledged more while the backup ran read those events again).

Each stream's snapshot is consistent in itself: the state recorded is the one the server reports as
the snapshot starts, and messages appended while it is read may be in it too, past that last_seq
(restore keeps them and counts them). The streams are taken one after another (see
docs/sre.md, Back up and restore a deployment). The projections are not backed up: the notifier
rebuilds them from the events. The folder must be new or empty (backup_dir_not_empty); on a failure
the files written are removed. Progress (bytes per stream) goes to stderr; restore with baton restore.

Options:
  --out <dir>   the folder to write (made when missing)
  --json        print { dir, prefix, created_at, baton_version, streams: [{ stream, file, bytes,
                sha256, messages, first_seq, last_seq }], absent_streams, tokens: { file, records, ids } }
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(argv, { out: { type: 'string' }, json: { type: 'boolean' } }, { min: 0, max: 0 });
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const dir = resolve(required(args, 'out'));
    const prefix = ctx.config().BATON_PREFIX;
    const io = progressIo(ctx);

    let made = false;
    try {
      const entries = await readdir(dir);
      if (entries.length > 0)
        throw new CliError(
          `${dir} is not empty (${entries.length} entries): a backup goes into a new or empty folder, so that no file of another one is taken for its own`,
          {
            code: CliErrorCode.backupDirNotEmpty,
            details: { dir, entries: entries.length },
          },
        );
    } catch (error) {
      if (error instanceof CliError) throw error;
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOTDIR') throw new CliError(`${dir} is a file, not a folder`, { code: CliErrorCode.backupDirNotEmpty, details: { dir, entries: null } });
      if (code !== 'ENOENT')
        throw new CliError(`cannot read ${dir}: ${(error as Error).message}`, { cause: error, code: CliErrorCode.invalidInput, details: { dir } });
      made = true;
    }

    // The token records are read from Redis: the default one may be another deployment's (or none),
    // and a backup without this deployment's tokens would drop every operator token on a restore.
    ctx.requireNamedServer('redis', 'backup', {
      doing: 'reads the API token records from',
      fix: "Set REDIS_URL to the deployment's Redis (the notifier's), as for restore.",
    });
    const nats = await ctx.nats();
    const present: string[] = [];
    const absent: string[] = [];
    const createdOf = new Map<string, string>();
    for (const stream of backupOrder(prefix)) {
      const info = await streamInfo(ctx, nats, stream);
      if (info === null) absent.push(stream);
      else {
        present.push(stream);
        createdOf.set(stream, info.created);
      }
    }
    const events = batonStreamNames(prefix).events;
    if (!present.includes(events))
      throw new CliError(
        `no stream ${events} on NATS: is this the platform's NATS, is BATON_PREFIX=${prefix} right, and was the platform started? Nothing was written`,
        {
          code: CliErrorCode.notFound,
          details: { stream: events, prefix },
        },
      );
    // Where each reader of the events stream stood before anything was taken: what it acknowledges
    // while the streams before the events stream are taken may have its effects (offers, commands in
    // the inbox) after them; the restore makes it read those events again (realignRestoredConsumers).
    const eventsConsumersAtStart: Record<string, number> = {};
    try {
      for await (const c of nats.jsm.consumers.list(events)) eventsConsumersAtStart[c.name] = acknowledgedThrough(c);
    } catch (error) {
      throw streamReadError(error, events, prefix, ctx.natsUrl());
    }

    // The snapshots hold every handoff's context and every customer message: the folder and its files are the admin's alone.
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const written: string[] = [];
    try {
      const createdAt = new Date().toISOString();
      const streams: BackupManifest['streams'] = [];
      for (const stream of present) {
        const file = `${stream}.snapshot`;
        const path = join(dir, file);
        const handle = await open(path, 'wx', 0o600);
        written.push(path);
        const hash = createHash('sha256');
        const progress = byteProgress(io, `backup ${stream}`);
        let bytes = 0;
        let info;
        try {
          info = await snapshotStream(nats, stream, {
            onChunk: async (chunk) => {
              await handle.write(chunk);
              hash.update(chunk);
              bytes += chunk.length;
              progress.update(bytes);
            },
          });
          await handle.sync();
        } catch (error) {
          progress.abandon();
          if (error instanceof StreamSnapshotError)
            throw new CliError(`${error.message}; nothing was kept of the backup`, {
              cause: error,
              code: CliErrorCode.snapshotFailed,
              details: { stream, js_err_code: error.jsErrCode },
            });
          throw streamReadError(error, stream, prefix, ctx.natsUrl());
        } finally {
          await handle.close();
        }
        const state = info.state;
        progress.finish(`${formatCount(state.messages)} messages (seq ${state.first_seq}-${state.last_seq}), ${bytesText(bytes)} -> ${file}`);
        const created = createdOf.get(stream);
        streams.push({
          stream,
          ...(created !== undefined ? { created } : {}),
          file,
          bytes,
          sha256: hash.digest('hex'),
          config: info.config as unknown as Record<string, unknown>,
          state: {
            messages: state.messages,
            bytes: state.bytes,
            first_seq: state.first_seq,
            last_seq: state.last_seq,
            ...(typeof state.consumer_count === 'number' ? { consumer_count: state.consumer_count } : {}),
          },
        });
      }

      const tokens = await readTokens(ctx, prefix);
      const tokensText = `${JSON.stringify(tokens, null, 2)}\n`;
      const tokensPath = join(dir, TOKENS_FILE);
      written.push(tokensPath);
      await writeFile(tokensPath, tokensText, { flag: 'wx', mode: 0o600 });
      io.stderr.write(`backup tokens: ${tokens.records.length} records, ${tokens.ids.length} ids -> ${TOKENS_FILE}\n`);

      const manifest: BackupManifest = {
        format_version: BACKUP_FORMAT_VERSION,
        baton_version: batonVersion(),
        prefix,
        created_at: createdAt,
        streams,
        absent_streams: absent,
        events_consumers_at_start: eventsConsumersAtStart,
        tokens: { file: TOKENS_FILE, bytes: Buffer.byteLength(tokensText), sha256: sha256(tokensText), records: tokens.records.length, ids: tokens.ids.length },
      };
      const manifestPath = join(dir, MANIFEST_FILE);
      written.push(manifestPath);
      // Written last: a folder without a manifest is no backup.
      await writeFile(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`, { flag: 'wx', mode: 0o600 });

      const summary = {
        dir,
        prefix,
        created_at: createdAt,
        baton_version: manifest.baton_version,
        streams: streams.map((s) => ({ stream: s.stream, file: s.file, bytes: s.bytes, sha256: s.sha256, ...pick(s.state) })),
        absent_streams: absent,
        tokens: { file: TOKENS_FILE, records: tokens.records.length, ids: tokens.ids.length },
      };
      if (flag(args, 'json')) printJson(ctx.io, summary);
      else ctx.io.stdout.write(`backed up ${streams.length} streams and ${tokens.records.length} token records into ${dir}\n`);
      return ExitCode.ok;
    } catch (error) {
      for (const path of written) await rm(path, { force: true }).catch(() => undefined);
      if (made) await rm(dir, { recursive: true, force: true }).catch(() => undefined);
      throw error;
    }
  },
};

/**
 * How many messages a restored stream holds past the state its backup recorded, or null when it is
 * not that state. The server reports a snapshot's state when it starts one and reads the stream's
 * files after (appends go on meanwhile; nothing is removed), so a stream backed up while it was
 * written may come back with messages appended after that state: as a contiguous run past its last
 * sequence, same first sequence. Anything else (fewer messages, another first sequence, a gap) is
 * not the backup. An empty stream's first sequence is 0 or its last + 1, as the server happens to
 * say: nats-server 2.9 says 0 of a stream never written to, and last + 1 of it restored.
 */
export function appendedPastState(
  expected: { messages: number; first_seq: number; last_seq: number },
  actual: { messages: number; first_seq: number; last_seq: number },
): number | null {
  const appended = actual.last_seq - expected.last_seq;
  if (appended < 0 || actual.messages - expected.messages !== appended) return null;
  if (expected.messages === 0) return appended === 0 || actual.first_seq === expected.last_seq + 1 ? appended : null;
  return actual.first_seq === expected.first_seq ? appended : null;
}

const pick = (state: { messages: number; first_seq: number; last_seq: number }) => ({
  messages: state.messages,
  first_seq: state.first_seq,
  last_seq: state.last_seq,
});

/** The sha256 and size of a file, read as a stream. */
async function digestOf(path: string): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of createReadStream(path)) {
    hash.update(chunk as Buffer);
    bytes += (chunk as Buffer).length;
  }
  return { bytes, sha256: hash.digest('hex') };
}

function corrupt(dir: string, file: string, reason: string, message: string, extra: Record<string, unknown> = {}): CliError {
  return new CliError(`the backup in ${dir} is not whole: ${file} ${message}; nothing was restored`, {
    code: CliErrorCode.backupCorrupt,
    details: { dir, file, reason, ...extra },
  });
}

/** The manifest of the backup in `dir`, and every file it names checked against its size and sha256. */
async function checkedBackup(dir: string): Promise<{ manifest: BackupManifest; tokens: TokensFile }> {
  let raw: string;
  try {
    raw = await readFile(join(dir, MANIFEST_FILE), 'utf8');
  } catch (error) {
    throw corrupt(dir, MANIFEST_FILE, 'missing', `cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
  let manifest: BackupManifest;
  try {
    const parsed = BackupManifestSchema.safeParse(JSON.parse(raw));
    if (!parsed.success) throw new Error(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
    manifest = parsed.data;
  } catch (error) {
    throw corrupt(dir, MANIFEST_FILE, 'invalid', `is not a backup manifest of this baton (${(error as Error).message})`);
  }
  for (const entry of [...manifest.streams, manifest.tokens]) {
    let found;
    try {
      found = await digestOf(join(dir, entry.file));
    } catch (error) {
      throw corrupt(dir, entry.file, 'missing', `cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
    if (found.bytes !== entry.bytes)
      throw corrupt(dir, entry.file, 'size', `holds ${found.bytes} bytes, the manifest says ${entry.bytes}`, { expected: entry.bytes, actual: found.bytes });
    if (found.sha256 !== entry.sha256)
      throw corrupt(dir, entry.file, 'sha256', 'is not what was backed up (its sha256 differs from the manifest)', {
        expected: entry.sha256,
        actual: found.sha256,
      });
  }
  let tokens: TokensFile;
  try {
    const parsed = TokensFileSchema.safeParse(JSON.parse(await readFile(join(dir, manifest.tokens.file), 'utf8')));
    if (!parsed.success) throw new Error(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
    tokens = parsed.data;
  } catch (error) {
    throw corrupt(dir, manifest.tokens.file, 'invalid', `is not a token backup (${(error as Error).message})`);
  }
  return { manifest, tokens };
}

export const restoreCommand: Command = {
  name: 'restore',
  summary: 'restore a backup (baton backup) into an empty deployment: its streams with their consumers, and the API token records',
  help: `Usage: baton restore --from <dir> [--replace-empty] [--json]

Restore the backup baton backup wrote in <dir> into the NATS and Redis of this deployment (a new
NATS after its storage was lost). First every file is checked against the manifest's size and
sha256 (backup_corrupt names the file), the backup's prefix against BATON_PREFIX
(backup_prefix_mismatch), and that none of its streams exists on NATS (stream_exists names them,
with the messages each holds): any of these and nothing is restored. Streams that hold nothing
(services started before the restore made them) are deleted first with --replace-empty; a stream
that holds messages never is. A restore that fails part-way deletes the streams it restored. Then each stream is restored with JetStream's own restore
API, consumers included, and its state checked against the manifest's (messages, first_seq,
last_seq; restore_mismatch otherwise). A stream backed up while it was written may hold a few
messages more, appended while the backup read it, past the recorded last_seq: those are kept and
counted (appended_during_backup). A durable consumer the snapshot holds as having delivered past the
restored stream's end (it went on while the backup read the stream) would skip the messages the
stream is given next: it is made again, same config, from its ack floor + 1 (consumers_realigned);
then the token records are written back where none is
(SET NX: a record already there is kept) and their ids re-added to the token set.

Then start the services: the notifier rebuilds the projections from the restored events; check
them with baton verify (docs/sre.md, Back up and restore a deployment).

Options:
  --from <dir>      the backup's folder
  --replace-empty   delete the backup's streams first when they exist and every one is empty
  --json        print { from, prefix, backup_created_at, streams: [{ stream, messages, first_seq,
                last_seq, bytes, consumers, appended_during_backup, consumers_realigned: [{ consumer,
                delivered, ack_floor, stream_last_seq, start_seq, reason: ahead|rewound }] }], tokens: { records, restored, kept, ids } }, and
                stream_identity { stream, backed_up, restored, watchdog_snapshot, projections }
                when the events stream came back with another creation time
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(argv, { from: { type: 'string' }, 'replace-empty': { type: 'boolean' }, json: { type: 'boolean' } }, { min: 0, max: 0 });
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const dir = resolve(required(args, 'from'));
    const prefix = ctx.config().BATON_PREFIX;
    const io = progressIo(ctx);
    try {
      if (!(await stat(dir)).isDirectory()) throw new Error('not a folder');
    } catch (error) {
      throw corrupt(dir, '.', 'missing', `cannot be read as a backup folder (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
    const { manifest, tokens } = await checkedBackup(dir);
    if (manifest.prefix !== prefix)
      throw new CliError(
        `the backup in ${dir} is of the deployment with BATON_PREFIX=${manifest.prefix}, and this one's is ${prefix}: its streams and keys are named for its prefix. Set BATON_PREFIX=${manifest.prefix}; nothing was restored`,
        { code: CliErrorCode.backupPrefixMismatch, details: { backup_prefix: manifest.prefix, prefix } },
      );
    // Not "start the platform": its services would make empty streams before the restore.
    ctx.requireNamedServer('nats', 'restore', {
      fix: "Set NATS_URL (and NATS_CREDS, the admin's) to the nats-server started from the deployment folder, with the services stopped (docs/sre.md, Back up and restore a deployment).",
    });
    if (tokens.records.length > 0 || tokens.ids.length > 0)
      ctx.requireNamedServer('redis', 'restore', { fix: "Set REDIS_URL to the deployment's Redis (the notifier's)." });

    const nats = await ctx.nats();
    const existing: Array<{ stream: string; messages: number }> = [];
    for (const entry of manifest.streams) {
      const messages = await streamMessages(ctx, nats, entry.stream);
      if (messages !== null) existing.push({ stream: entry.stream, messages });
    }
    const allEmpty = existing.every((e) => e.messages === 0);
    if (existing.length > 0 && !(flag(args, 'replace-empty') && allEmpty)) {
      const names = existing.map((e) => `${e.stream} (${formatCount(e.messages)} messages)`).join(', ');
      throw new CliError(
        `${names} ${existing.length === 1 ? 'exists' : 'exist'} already on NATS: a backup is restored into a deployment without its streams (a new NATS), with the services stopped. ` +
          (allEmpty
            ? 'They hold nothing (services started before the restore make them empty): stop the services and run it again with --replace-empty, which deletes them first. Nothing was restored'
            : 'Some hold messages: restore into a NATS without them. Nothing was restored'),
        {
          code: CliErrorCode.streamExists,
          details: { streams: existing.map((e) => e.stream), messages: Object.fromEntries(existing.map((e) => [e.stream, e.messages])), empty: allEmpty },
        },
      );
    }
    // --replace-empty, and every one of them empty: what services started too early made.
    for (const { stream } of existing) await deleteStream(ctx, nats, stream);
    if (existing.length > 0) io.stderr.write(`restore: deleted the empty ${existing.map((e) => e.stream).join(', ')} first (--replace-empty)\n`);
    // Redis is reached before any stream is written: a restore that could not write the tokens would leave half a deployment.
    const redis = tokens.records.length > 0 || tokens.ids.length > 0 ? (await ctx.redis()).client : null;

    const restored: Array<{
      stream: string;
      messages: number;
      first_seq: number;
      last_seq: number;
      bytes: number;
      consumers: number;
      appended_during_backup: number;
      consumers_realigned: RealignedConsumer[];
    }> = [];
    const renamed: Array<{ stream: string; backed_up: string; restored: string }> = [];
    // What this run restored, deleted again: a restore either puts every stream back or none.
    const rollBackRestored = () =>
      rollBack(
        ctx,
        nats,
        restored.map((r) => r.stream),
      );
    for (const entry of manifest.streams) {
      const progress = byteProgress(io, `restore ${entry.stream}`);
      let info;
      try {
        info = await restoreStream(
          nats,
          entry.stream,
          { config: entry.config as never, state: entry.state as never },
          createReadStream(join(dir, entry.file), { highWaterMark: 128 * 1024 }) as AsyncIterable<Uint8Array>,
          { onProgress: (bytes) => progress.update(bytes) },
        );
      } catch (error) {
        progress.abandon();
        const rolledBack = await rollBackRestored();
        const said =
          rolledBack.length > 0 ? `; the streams restored before it (${rolledBack.join(', ')}) were deleted again: nothing is left of the restore` : '';
        if (error instanceof StreamSnapshotError)
          throw new CliError(`${error.message}${said}`, {
            cause: error,
            code: error.code === StreamSnapshotErrorCode.streamExists ? CliErrorCode.streamExists : CliErrorCode.restoreFailed,
            details: {
              stream: entry.stream,
              js_err_code: error.jsErrCode,
              rolled_back: rolledBack,
              ...(error.code === StreamSnapshotErrorCode.streamExists ? { streams: [entry.stream] } : {}),
            },
          });
        throw streamReadError(error, entry.stream, prefix, ctx.natsUrl());
      }
      const actual = { messages: info.state.messages, first_seq: info.state.first_seq, last_seq: info.state.last_seq };
      const expected = pick(entry.state);
      const appended = appendedPastState(expected, actual);
      restored.push({
        stream: entry.stream,
        ...actual,
        bytes: info.state.bytes,
        consumers: info.state.consumer_count ?? 0,
        appended_during_backup: appended ?? 0,
        consumers_realigned: [],
      });
      if (appended === null) {
        const rolledBack = await rollBackRestored();
        throw new CliError(
          `restored ${entry.stream} holds ${actual.messages} messages (seq ${actual.first_seq}-${actual.last_seq}), the backup's ${expected.messages} (seq ${expected.first_seq}-${expected.last_seq}); ` +
            `the streams this restore made (${rolledBack.join(', ')}) were deleted again: nothing is left of it`,
          { code: CliErrorCode.restoreMismatch, details: { stream: entry.stream, expected, actual, rolled_back: rolledBack } },
        );
      }
      // A consumer the snapshot took after more was delivered than its messages hold would skip what
      // the stream is given next: made again from where it may have nothing.
      let realigned: RealignedConsumer[];
      try {
        // The events stream is taken last: its readers are also made again from where they stood when
        // the backup began, so what they had published into the streams taken before it is published again.
        const atStart =
          entry.stream === batonStreamNames(prefix).events && manifest.events_consumers_at_start !== undefined
            ? new Map(Object.entries(manifest.events_consumers_at_start))
            : undefined;
        realigned = await realignRestoredConsumers(nats, entry.stream, atStart);
      } catch (error) {
        progress.abandon();
        const rolledBack = await rollBackRestored();
        throw new CliError(
          `restored ${entry.stream}, but its consumers could not be checked against it (${(error as Error).message}); ` +
            `the streams this restore made (${rolledBack.join(', ')}) were deleted again: nothing is left of it`,
          { cause: error, code: CliErrorCode.restoreFailed, details: { stream: entry.stream, js_err_code: jsErrCode(error) ?? null, rolled_back: rolledBack } },
        );
      }
      restored[restored.length - 1]!.consumers_realigned = realigned;
      progress.finish(
        `${formatCount(actual.messages)} messages (seq ${actual.first_seq}-${actual.last_seq}), ${restored.at(-1)?.consumers ?? 0} consumers` +
          (appended > 0 ? ` (${formatCount(appended)} of them appended while the backup read the stream, past the state it recorded)` : '') +
          (realigned.length > 0
            ? `; ${realigned
                .map((r) =>
                  r.reason === 'ahead'
                    ? `${r.consumer} had delivered to seq ${r.delivered}, past the stream's end: made again from seq ${r.start_seq}`
                    : `${r.consumer} had acknowledged past where it stood when the backup began: made again from seq ${r.start_seq}`,
                )
                .join('; ')}`
            : ''),
      );
      if (entry.created !== undefined && info.created !== entry.created)
        renamed.push({ stream: entry.stream, backed_up: entry.created, restored: info.created });
    }
    // A snapshot carries the creation time its server's store holds, which after a restart of that
    // server is the restart: the restored events stream then reads as another one to what recorded
    // the old identity (the watchdog's snapshot, projections kept in Redis). They were folded from
    // this very history, so they take the new identity — unless they hold more than it does.
    const identity = await adoptRestoredIdentity(ctx, nats, redis, prefix, renamed, restored);
    if (identity !== null) {
      const left = [
        ...(identity.watchdog_snapshot.outcome === 'adopted' || identity.watchdog_snapshot.outcome === 'none'
          ? []
          : [`the watchdog's snapshot (${identity.watchdog_snapshot.outcome}: the watchdog reads the events stream from its start once)`]),
        ...Object.entries(identity.projections ?? {})
          .filter(([, o]) => o.outcome === 'other_stream' || o.outcome === 'ahead')
          .map(([name, o]) => `projection ${name} (${o.outcome}: rebuilt from the restored events at the notifier's start)`),
        ...(identity.projections === null
          ? [
              `the projections kept in Redis, if any (${identity.projections_error !== undefined ? `Redis did not answer: ${identity.projections_error}` : 'REDIS_URL not set'}: rebuilt from the restored events at the notifier's start)`,
            ]
          : []),
      ];
      ctx.warn(
        CliWarningCode.streamIdentityChanged,
        `${identity.stream} restored with another creation time than the backed-up stream's (its server had restarted since the stream was made); ` +
          (left.length === 0
            ? 'what recorded the old one (the watchdog snapshot, the projections in Redis) now records the new one'
            : `these still record the old one: ${left.join('; ')} — expected here, logged at error as "built from another events stream"`),
        undefined,
        { streams: renamed, ...identity },
      );
    }

    let written = 0;
    let kept = 0;
    if (redis !== null) {
      for (const record of tokens.records) {
        // NX: a record already there (made since, or restored before) is never overwritten.
        const set = await redis.set(ApiTokenKeys.token(prefix, record.token_id), record.value, 'NX');
        if (set === 'OK') written++;
        else kept++;
      }
      if (tokens.ids.length > 0) await redis.sadd(ApiTokenKeys.tokens(prefix), ...tokens.ids);
      io.stderr.write(`restore tokens: ${written} records written, ${kept} kept as they were, ${tokens.ids.length} ids in the token set\n`);
    }

    const summary = {
      from: dir,
      prefix,
      backup_created_at: manifest.created_at,
      streams: restored,
      ...(identity !== null ? { stream_identity: identity } : {}),
      tokens: { records: tokens.records.length, restored: written, kept, ids: tokens.ids.length },
    };
    if (flag(args, 'json')) printJson(ctx.io, summary);
    else
      ctx.io.stdout.write(
        `restored ${restored.length} streams and ${written} token records (${kept} kept as they were) from ${dir}\nnow start the services: the notifier rebuilds the projections from the events; then check them with baton verify\n`,
      );
    return ExitCode.ok;
  },
};

/** What `restore` did about the restored events stream's new creation time (`--json`: `stream_identity`). */
interface RestoredIdentity {
  stream: string;
  /** The creation time the backed-up stream reported, and the restored one's. */
  backed_up: string;
  restored: string;
  watchdog_snapshot: SnapshotRestamp;
  /** Per projection kept in Redis; null when Redis was not looked at (not named, or it did not answer: `projections_error`). */
  projections: Record<string, RestampOutcome> | null;
  projections_error?: string;
}

/**
 * The restored events stream came back with another creation time (its identity) than the one the
 * backup recorded: the watchdog's saved snapshot and the projections kept in Redis that recorded
 * the old identity, and hold no more of the stream than it does, were folded from this very history
 * — they record the new identity instead, so neither is thrown away at the next start. Null when the
 * events stream kept its identity. Never fails the restore (the streams are back): what could not be
 * done is said.
 */
async function adoptRestoredIdentity(
  ctx: CliContext,
  nats: Awaited<ReturnType<CliContext['nats']>>,
  redisReached: unknown,
  prefix: string,
  renamed: ReadonlyArray<{ stream: string; backed_up: string; restored: string }>,
  restored: ReadonlyArray<{ stream: string; last_seq: number }>,
): Promise<RestoredIdentity | null> {
  const events = batonStreamNames(prefix).events;
  const change = renamed.find((r) => r.stream === events);
  if (change === undefined) return null;
  const lastSeq = restored.find((r) => r.stream === events)?.last_seq ?? 0;
  const watchdog = await restampWatchdogSnapshot(nats, prefix, { eventsStream: events, from: change.backed_up, to: change.restored, lastSeq }).catch(
    (): SnapshotRestamp => ({ outcome: 'unreadable' }),
  );
  const identity: RestoredIdentity = { stream: events, backed_up: change.backed_up, restored: change.restored, watchdog_snapshot: watchdog, projections: null };
  if (redisReached === null && !ctx.namedServer('redis')) return identity;
  try {
    identity.projections = await restampEventsStream(await ctx.projections(), { from: change.backed_up, to: change.restored, throughSeq: lastSeq });
  } catch (error) {
    identity.projections_error = error instanceof Error ? error.message : String(error);
  }
  return identity;
}
