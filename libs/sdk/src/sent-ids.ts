import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { edgeRefusalOf, Limits, RejectionCode } from '@baton/contracts';
import { stableStringify } from '@baton/domain';
import { isNoResponders, jsApiError, mapPublishError, PublishTimeout, type NatsHeaders, type NatsJetStream } from '@baton/eventstore';
import { DuplicateMessageError, EdgeRefusedError, EdgeUnavailableError, InvalidInputError, MessageIdReusedError } from './errors';

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
 * How a publish whose outcome is unknown is sent again. A publish that times out may or may not be
 * stored; sending the same bytes under the same `Nats-Msg-Id` again is safe within the stream's
 * duplicate window (2 minutes): JetStream stores the message at most once and answers a later copy
 * with the original sequence (`duplicate: true`). Only a timeout is retried; every other failure
 * (a refusal, no stream, a foreign duplicate) answers the same on every attempt.
 */
export interface PublishRetry {
  /** Attempts in all, each under the same message id (default 3: the first and two retries). */
  attempts: number;
  /** How long one attempt waits for the stream's acknowledgement, ms (default 5000). */
  timeoutMs: number;
  /** The wait before retry n is `backoffMs * n`, ms (default 200). */
  backoffMs: number;
}

export const DEFAULT_PUBLISH_RETRY: Readonly<PublishRetry> = { attempts: 3, timeoutMs: 5000, backoffMs: 200 };

/**
 * The longest a publish may keep retrying, ms: half the inbox stream's 2-minute duplicate window, so
 * that the last copy is still recognised as the first one even when the first was stored the
 * moment it was sent.
 */
export const MAX_PUBLISH_RETRY_SPAN_MS = 60_000;

/** A setting as the caller wrote it: a string quoted (`'3'` is not 3), anything else as is (NaN stays NaN). */
const shown = (value: unknown): string => (typeof value === 'string' ? JSON.stringify(value) : String(value));

/**
 * `retry` with the defaults filled in, checked: whole attempts (at least 1), a positive timeout, a
 * backoff of 0 or more, and every attempt and wait together within {@link MAX_PUBLISH_RETRY_SPAN_MS}.
 * @throws RangeError naming the setting that breaks a rule.
 */
export function publishRetryOf(retry: Partial<PublishRetry> = {}): PublishRetry {
  const merged = { ...DEFAULT_PUBLISH_RETRY, ...retry };
  const { attempts, timeoutMs, backoffMs } = merged;
  if (!Number.isInteger(attempts) || attempts < 1) throw new RangeError(`publishAttempts must be a whole number of at least 1 (got ${shown(attempts)})`);
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new RangeError(`publishTimeoutMs must be a positive number of ms (got ${shown(timeoutMs)})`);
  if (!Number.isFinite(backoffMs) || backoffMs < 0) throw new RangeError(`the publish backoff must be 0 ms or more (got ${shown(backoffMs)})`);
  const span = publishRetrySpanMs(merged);
  if (span > MAX_PUBLISH_RETRY_SPAN_MS) {
    throw new RangeError(
      `publishAttempts ${attempts} × publishTimeoutMs ${timeoutMs} (with the waits between them: ${span} ms) exceeds ${MAX_PUBLISH_RETRY_SPAN_MS} ms, half the stream's 2-minute duplicate window: a late copy could be stored twice`,
    );
  }
  return merged;
}

/** How often a publish through the agent edge is sent again while no ledger relays it, ms. */
export const EDGE_RETRY_MS = 250;

/** The longest a publish with `retry` takes before it gives up: every attempt's timeout and every wait. */
export function publishRetrySpanMs(retry: PublishRetry): number {
  let waits = 0;
  for (let n = 1; n < retry.attempts; n++) waits += retry.backoffMs * n;
  return retry.attempts * retry.timeoutMs + waits;
}

/**
 * Publish `data` to `subject` with `Nats-Msg-Id` `msgId` and wait for the stream's ack. A duplicate
 * of this client's own earlier attempt resolves with `duplicate: true` (a retry is safe); a
 * duplicate of an id it never sent throws {@link DuplicateMessageError} (nothing new was stored);
 * other content under an id this client already sent throws {@link MessageIdReusedError} (nothing
 * sent). `identity` is the text that makes the message what it is (default: the bytes sent); a
 * caller whose retries differ only in what the SDK fills itself (a result's `produced_at`) passes
 * the body without it.
 * An attempt that times out is sent again under the same id as `retry` says (see
 * {@link PublishRetry}); after the last, `PublishTimeout` (with `attempts`) says the message may
 * or may not be stored: publishing it again with the same id is still safe. Other publish failures
 * are mapped (`StreamNotFound`, `PermissionDenied`, `StorageFull` for a full inbox) and not retried. A message over
 * `Limits.maxMessageBytes` is refused before sending ({@link InvalidInputError},
 * `payload_too_large`). Through the agent edge (`edge`), "no responders" means no ledger relays it
 * (stopped or restarting), not a missing stream: tried again every {@link EDGE_RETRY_MS} (not counted
 * as an attempt) for as long as a publish whose every attempt timed out would take
 * ({@link publishRetrySpanMs}), then {@link EdgeUnavailableError} (nothing stored).
 */
export async function publishOnce(
  js: Pick<NatsJetStream, 'publish'>,
  sent: SentMessageIds,
  subject: string,
  data: Uint8Array,
  msgId: string,
  headers?: NatsHeaders,
  identity?: string,
  retry: PublishRetry = DEFAULT_PUBLISH_RETRY,
  edge = false,
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
  let ack: { seq: number; duplicate: boolean; stream: string } | undefined;
  const started = Date.now();
  let unrelayed = 0;
  for (let attempt = 1; ack === undefined; attempt++) {
    if (attempt > 1) await sleep(retry.backoffMs * (attempt - 1));
    if (!sent.attempt(msgId, digest)) throw new MessageIdReusedError(msgId, subject);
    try {
      ack = await js.publish(subject, data, { msgID: msgId, timeout: retry.timeoutMs, ...(headers !== undefined ? { headers } : {}) });
    } catch (error) {
      // The agent edge answered that it refused the message: nothing was stored, and a retry is refused alike.
      const refusal = edgeRefusalOf(error);
      if (refusal !== null) throw new EdgeRefusedError(subject, refusal, { cause: error });
      // A stream's own answer (a full inbox: 503 "maximum bytes exceeded") carries a JetStream API
      // error; nats.js gives it the client code of "no responders" all the same.
      if (edge && isNoResponders(error) && jsApiError(error) === undefined) {
        // No ledger relays the edge now (a restart): nothing was stored; wait and send it again.
        unrelayed++;
        const waited = Date.now() - started;
        if (waited + EDGE_RETRY_MS > publishRetrySpanMs(retry)) throw new EdgeUnavailableError(subject, unrelayed, waited, { cause: error });
        await sleep(EDGE_RETRY_MS);
        attempt--;
        continue;
      }
      const mapped = mapPublishError(error, subject, undefined);
      if (!(mapped instanceof PublishTimeout)) throw mapped;
      if (attempt >= retry.attempts) throw new PublishTimeout(subject, { cause: error, attempts: attempt, msgId });
    }
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
