import { createHash, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import {
  JsErrCode,
  jsErrCode,
  maxPayloadOf,
  provision,
  Retention,
  SnapshotHeadSchema,
  Storage,
  StreamNotFound,
  streamReader,
  watchdogSnapshotHeadSubject,
  watchdogSnapshotStream,
  type NatsHandle,
  type SnapshotHead,
} from '@baton/eventstore';

export type { SnapshotHead } from '@baton/eventstore';

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);
const TEXT = new TextEncoder();
const UTF8 = new TextDecoder();

/** Most bytes of one chunk (fewer when the server takes smaller messages). */
const CHUNK_BYTES = 256 * 1024;

/** Which history a snapshot belongs to and how far it got. */
export interface SnapshotPosition {
  fingerprint: string;
  eventsStream: string;
  eventsCreated: string;
  throughSeq: number;
}

/** Why no snapshot was loaded (a restart then reads the events stream from its start). */
export type SnapshotMiss = 'none' | 'other_build' | 'other_stream' | 'ahead_of_stream' | 'unreadable';

export type LoadedSnapshot = { ok: true; head: SnapshotHead; document: unknown } | { ok: false; miss: SnapshotMiss; detail: string };

export type SaveOutcome = { saved: true; head: SnapshotHead } | { saved: false; reason: 'superseded' };

/**
 * Where the watchdog keeps its snapshot: the stream {@link watchdogSnapshotStream} (`<PREFIX>_WATCHDOG`,
 * one message per subject). A snapshot is a gzipped JSON document cut into chunks
 * (`<prefix>.wd.chunk.<gen>.<n>`, each under the server's largest message) and a head
 * (`<prefix>.wd.head`) naming them, written last. Several watchdogs may save at once: each writes
 * its head only if the head it read before writing its chunks is still the last one
 * (`Nats-Expected-Last-Subject-Sequence`), so exactly one of two racing saves lands; the loser
 * purges its own chunks, the winner every chunk stored before its own (older snapshots, and the
 * chunks of any save still racing, whose head write will fail). A crash between chunks and head
 * leaves chunks the next successful save purges. Only nats-server 2.9 features are used.
 */
export class SnapshotStore {
  private readonly stream: { name: string; subjects: string[] };
  private readonly head: string;
  private created = false;

  constructor(
    private readonly nats: Pick<NatsHandle, 'js' | 'jsm'>,
    private readonly prefix: string,
    private readonly replicas: number,
  ) {
    this.stream = watchdogSnapshotStream(prefix);
    this.head = watchdogSnapshotHeadSubject(prefix);
  }

  /** The name of the stream snapshots are kept in. */
  get streamName(): string {
    return this.stream.name;
  }

  /** The last snapshot saved, when it is of `expected`'s build and history and not past its stream; else why not. */
  async load(expected: Omit<SnapshotPosition, 'throughSeq'> & { lastSeq: number }): Promise<LoadedSnapshot> {
    const reader = streamReader(this.nats, this.stream.name);
    let headMessage;
    try {
      headMessage = await reader.lastOnSubject(this.head);
    } catch (error) {
      if (error instanceof StreamNotFound) {
        return { ok: false, miss: 'none', detail: `no stream ${this.stream.name}` };
      }
      throw error;
    }
    if (headMessage === null) return { ok: false, miss: 'none', detail: 'no snapshot saved yet' };
    let parsed: unknown;
    try {
      parsed = JSON.parse(UTF8.decode(headMessage.data));
    } catch {
      return { ok: false, miss: 'unreadable', detail: 'the head is not JSON' };
    }
    const checked = SnapshotHeadSchema.safeParse(parsed);
    if (!checked.success)
      return { ok: false, miss: 'unreadable', detail: `the head lacks fields: ${checked.error.issues.map((i) => i.path.join('.')).join(', ')}` };
    const head: SnapshotHead = checked.data;
    if (head.fingerprint !== expected.fingerprint) {
      return { ok: false, miss: 'other_build', detail: `saved by fingerprint ${head.fingerprint}, this watchdog folds as ${expected.fingerprint}` };
    }
    if (head.events_stream !== expected.eventsStream || head.events_created !== expected.eventsCreated) {
      return { ok: false, miss: 'other_stream', detail: `saved from ${head.events_stream} created ${head.events_created}` };
    }
    if (head.through_seq > expected.lastSeq) {
      return { ok: false, miss: 'ahead_of_stream', detail: `saved through seq ${head.through_seq}; the stream ends at ${expected.lastSeq}` };
    }
    const parts: Uint8Array[] = [];
    for (const [n, seq] of head.chunks.entries()) {
      const chunk = await reader.message(seq);
      if (chunk === null || chunk.subject !== this.chunkSubject(head.gen, n)) {
        return { ok: false, miss: 'unreadable', detail: `chunk ${n} (seq ${seq}) of generation ${head.gen} is missing` };
      }
      parts.push(chunk.data);
    }
    const gzipped = Buffer.concat(parts);
    const sha256 = createHash('sha256').update(gzipped).digest('hex');
    if (gzipped.length !== head.bytes || sha256 !== head.sha256)
      return { ok: false, miss: 'unreadable', detail: 'the chunks do not match the head (size or SHA-256)' };
    try {
      return { ok: true, head, document: JSON.parse(UTF8.decode(await gunzipAsync(gzipped))) as unknown };
    } catch (error) {
      return { ok: false, miss: 'unreadable', detail: `the document does not unpack: ${String(error)}` };
    }
  }

  /**
   * Save `json` (the document, serialized by the caller at the moment it was taken) as the snapshot
   * through `position`. Throws when the stream cannot be written (the caller tries again later).
   */
  async save(json: string, position: SnapshotPosition, by: string): Promise<SaveOutcome> {
    await this.ensureStream();
    const reader = streamReader(this.nats, this.stream.name);
    const before = await reader.lastOnSubject(this.head);
    const gzipped = await gzipAsync(TEXT.encode(json));
    const gen = randomBytes(6).toString('hex');
    const size = Math.max(1024, Math.min(CHUNK_BYTES, maxPayloadOf(this.nats.js) - 4096));
    const chunks: number[] = [];
    try {
      for (let offset = 0, n = 0; offset < gzipped.length || n === 0; offset += size, n++) {
        const ack = await this.nats.js.publish(this.chunkSubject(gen, n), gzipped.subarray(offset, offset + size));
        chunks.push(ack.seq);
      }
      const head: SnapshotHead = {
        fingerprint: position.fingerprint,
        events_stream: position.eventsStream,
        events_created: position.eventsCreated,
        through_seq: position.throughSeq,
        taken_at: new Date().toISOString(),
        by,
        gen,
        chunks,
        bytes: gzipped.length,
        sha256: createHash('sha256').update(gzipped).digest('hex'),
      };
      try {
        await this.nats.js.publish(this.head, TEXT.encode(JSON.stringify(head)), { expect: { lastSubjectSequence: before?.seq ?? 0 } });
      } catch (error) {
        if (jsErrCode(error) !== JsErrCode.wrongLastSequence) throw error;
        await this.purgeGeneration(gen);
        return { saved: false, reason: 'superseded' };
      }
      // Every chunk stored before this save's first: older snapshots', and those of saves racing this
      // one (their heads fail now). A purge up to sequence 1 is no bound at all to nats-server (it
      // purges every match): the stream's first message has nothing before it to purge.
      const first = chunks[0] as number;
      if (first > 1) await this.nats.jsm.streams.purge(this.stream.name, { filter: `${this.prefix}.wd.chunk.>`, seq: first });
      return { saved: true, head };
    } catch (error) {
      await this.purgeGeneration(gen).catch(() => undefined);
      throw error;
    }
  }

  private chunkSubject(gen: string, n: number): string {
    return `${this.prefix}.wd.chunk.${gen}.${n}`;
  }

  private async purgeGeneration(gen: string): Promise<void> {
    await this.nats.jsm.streams.purge(this.stream.name, { filter: `${this.prefix}.wd.chunk.${gen}.>` });
  }

  /** Make the stream on the first save (the same config from several watchdogs at once is fine). */
  private async ensureStream(): Promise<void> {
    if (this.created) return;
    await provision(
      this.nats.jsm,
      {
        streams: [
          {
            name: this.stream.name,
            subjects: this.stream.subjects,
            description: "The watchdog's saved state: a restart reads the events stream from the snapshot's sequence",
            retention: Retention.limits,
            storage: Storage.file,
            replicas: this.replicas,
            duplicateWindowMs: 60_000,
            maxMsgsPerSubject: 1,
          },
        ],
      },
      { retryForMs: 0 },
    );
    this.created = true;
  }
}
