import { z } from 'zod';
import type { NatsHandle } from './connection';
import { streamReader } from './stream-reader';
import { StreamNotFound } from './errors';
import { watchdogSnapshotStream } from './topology';

const TEXT = new TextEncoder();
const UTF8 = new TextDecoder();

/**
 * The head of the watchdog's saved snapshot (`<prefix>.wd.head` in `<PREFIX>_WATCHDOG`; the
 * watchdog's `SnapshotStore` writes it after the chunks and checks it when it loads): which build
 * and settings folded it (`fingerprint`), the events stream it was folded from (its name and
 * creation time: a stream made again is another history), through which sequence, and where its
 * chunks are. Here because the watchdog and `baton restore` both read it.
 */
export const SnapshotHeadSchema = z.object({
  fingerprint: z.string(),
  events_stream: z.string(),
  events_created: z.string(),
  through_seq: z.number().int().min(0),
  taken_at: z.string(),
  /** The instance that saved it (logs). */
  by: z.string(),
  /** The generation its chunks were written under (`<prefix>.wd.chunk.<gen>.<n>`). */
  gen: z.string().regex(/^[0-9a-f]+$/),
  /** The stream sequence of each chunk, in order. */
  chunks: z.array(z.number().int().positive()).min(1),
  /** Bytes of the gzipped document, and its SHA-256 (hex). */
  bytes: z.number().int().min(0),
  sha256: z.string(),
});
export type SnapshotHead = z.infer<typeof SnapshotHeadSchema>;

/** The subject of the watchdog snapshot's head. */
export function watchdogSnapshotHeadSubject(prefix: string): string {
  return `${prefix}.wd.head`;
}

/** What {@link restampWatchdogSnapshot} did. */
export type SnapshotRestamp =
  | { outcome: 'adopted'; throughSeq: number }
  /** No snapshot saved (no stream, or no head). */
  | { outcome: 'none' }
  /** The head names another stream or creation time than `from`: left alone. */
  | { outcome: 'other_stream'; eventsCreated: string }
  /** Saved through a sequence past the stream's end: left alone (the watchdog reads from the start). */
  | { outcome: 'ahead'; throughSeq: number }
  | { outcome: 'unreadable' };

/**
 * The events stream `eventsStream` reads with a new creation time (`to`; a restore from a backup
 * can give it one): a saved watchdog snapshot folded from it under `from`, through no more than
 * `lastSeq`, gets a head naming `to` — the same chunks, the same fold — written only if the head is
 * still the one read (a watchdog saving meanwhile wins). So the watchdog starts from its snapshot
 * instead of reading the events stream from its start.
 */
export async function restampWatchdogSnapshot(
  nats: Pick<NatsHandle, 'js' | 'jsm'>,
  prefix: string,
  change: { eventsStream: string; from: string; to: string; lastSeq: number },
): Promise<SnapshotRestamp> {
  const subject = watchdogSnapshotHeadSubject(prefix);
  let message;
  try {
    message = await streamReader(nats, watchdogSnapshotStream(prefix).name).lastOnSubject(subject);
  } catch (error) {
    if (error instanceof StreamNotFound) return { outcome: 'none' };
    throw error;
  }
  if (message === null) return { outcome: 'none' };
  let head: SnapshotHead;
  try {
    const parsed = SnapshotHeadSchema.safeParse(JSON.parse(UTF8.decode(message.data)));
    if (!parsed.success) return { outcome: 'unreadable' };
    head = parsed.data;
  } catch {
    return { outcome: 'unreadable' };
  }
  if (head.events_stream !== change.eventsStream || head.events_created !== change.from) return { outcome: 'other_stream', eventsCreated: head.events_created };
  if (head.through_seq > change.lastSeq) return { outcome: 'ahead', throughSeq: head.through_seq };
  await nats.js.publish(subject, TEXT.encode(JSON.stringify({ ...head, events_created: change.to })), { expect: { lastSubjectSequence: message.seq } });
  return { outcome: 'adopted', throughSeq: head.through_seq };
}
