import { createHash } from 'node:crypto';
import { Limits, RejectionCode } from '@baton/contracts';
import { stableStringify } from '@baton/domain';
import { mapPublishError, type NatsHeaders, type NatsJetStream } from '@baton/eventstore';
import { DuplicateMessageError, InvalidInputError, MessageIdReusedError } from './errors';

/** How many message ids a client remembers by default (its publishes over the 2-minute duplicate window should fit). */
export const DEFAULT_SENT_IDS = 10_000;

/**
 * The `Nats-Msg-Id`s this client has published, most recently used last, at most `capacity` (a
 * bounded LRU: the oldest is forgotten first). JetStream answers `duplicate: true` when a message
 * with the same id was stored within the stream's duplicate window, and drops the new one; that is
 * only harmless when the stored message is this client's own earlier attempt (a retry after a
 * timeout). An id this client never sent before is another publisher's message: the new message
 * was lost, and the SDK says so ({@link DuplicateMessageError}). Each id is remembered with a digest
 * of the bytes first sent under it: another message under the same id is not a retry, and is
 * refused before it is sent ({@link MessageIdReusedError}).
 */
export class SentMessageIds {
  private readonly entries = new Map<string, { attempts: number; foreign: boolean; digest: string | null }>();

  constructor(readonly capacity = DEFAULT_SENT_IDS) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError('the sent-id memory needs a capacity of at least 1');
  }

  /** How many ids are remembered. */
  get size(): number {
    return this.entries.size;
  }

  /** True when this client has tried to publish `id` and still remembers it. */
  has(id: string): boolean {
    return this.entries.has(id);
  }

  /**
   * Record an attempt to publish `id` (it becomes the most recently used), with the digest of what
   * is sent under it. Returns false, recording nothing, when this client sent other bytes under
   * `id` before: that is a new message under a used id, not a retry.
   */
  attempt(id: string, digest: string | null = null): boolean {
    const entry = this.entries.get(id) ?? { attempts: 0, foreign: false, digest };
    if (entry.digest !== null && digest !== null && entry.digest !== digest) return false;
    this.entries.delete(id);
    this.entries.set(id, { ...entry, attempts: entry.attempts + 1, digest: entry.digest ?? digest });
    while (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
    return true;
  }

  /**
   * Whether a `duplicate: true` answer to an attempt on `id` is this client's own message: it had
   * attempted `id` before (or attempts it concurrently), and the id was not found to be another
   * publisher's.
   */
  isOwnDuplicate(id: string): boolean {
    const entry = this.entries.get(id);
    return entry !== undefined && !entry.foreign && entry.attempts > 1;
  }

  /** The stream holds another publisher's message under `id`: every later duplicate of it is an error too. */
  markForeign(id: string): void {
    const entry = this.entries.get(id);
    if (entry !== undefined) this.entries.set(id, { ...entry, foreign: true });
  }
}

/** What JetStream answered to a publish the SDK accepted. */
export interface PublishAck {
  seq: number;
  duplicate: boolean;
  stream: string;
}

/**
 * Publish `data` to `subject` with `Nats-Msg-Id` `msgId` and wait for the stream's ack. A duplicate
 * of this client's own earlier attempt resolves with `duplicate: true` (a retry is safe); a
 * duplicate of an id it never sent throws {@link DuplicateMessageError} (nothing new was stored);
 * other content under an id this client already sent throws {@link MessageIdReusedError} (nothing
 * sent). `identity` is the text that makes the message what it is (default: the bytes sent); a
 * caller whose retries differ only in what the SDK fills itself (a result's `produced_at`) passes
 * the body without it.
 * Publish failures are mapped (`PublishTimeout`: retry with the same id; `StreamNotFound`). A
 * message over `Limits.maxMessageBytes` is refused before sending ({@link InvalidInputError},
 * `payload_too_large`).
 */
export async function publishOnce(
  js: Pick<NatsJetStream, 'publish'>,
  sent: SentMessageIds,
  subject: string,
  data: Uint8Array,
  msgId: string,
  headers?: NatsHeaders,
  identity?: string,
): Promise<PublishAck> {
  if (data.length > Limits.maxMessageBytes) {
    // What Baton would dead-letter `payload_too_large` on arrival: refused here, nothing sent.
    throw new InvalidInputError(`message for ${subject}`, {
      code: RejectionCode.payloadTooLarge,
      message: `the message is ${data.length} bytes; the cap is ${Limits.maxMessageBytes}`,
      issues: [],
    });
  }
  const digest = createHash('sha256')
    .update(identity ?? data)
    .digest('base64url');
  if (!sent.attempt(msgId, digest)) throw new MessageIdReusedError(msgId, subject);
  let ack: { seq: number; duplicate: boolean; stream: string };
  try {
    ack = await js.publish(subject, data, { msgID: msgId, ...(headers !== undefined ? { headers } : {}) });
  } catch (error) {
    throw mapPublishError(error, subject, undefined);
  }
  if (ack.duplicate && !sent.isOwnDuplicate(msgId)) {
    sent.markForeign(msgId);
    throw new DuplicateMessageError(msgId, subject, ack.stream, ack.seq);
  }
  return { seq: ack.seq, duplicate: ack.duplicate, stream: ack.stream };
}

/**
 * What makes a message the same message for {@link publishOnce}: the body as validated, without
 * `produced_at` (which the SDK fills with the clock when the caller leaves it out), written with
 * its keys sorted at every level — so a retry of the same result is the same message whatever
 * order its maps (`variables`, `decision`, evidence…) were built in, and another body under its id
 * is not.
 */
export function messageIdentity(body: object): string {
  const { produced_at: _producedAt, ...rest } = body as Record<string, unknown>;
  return stableStringify(rest);
}
