import { deadLetter, letterLogFields, REFUSED_LETTER_BYTES, type DeadLetterInput, type NatsHandle } from '@baton/eventstore';
import type { JsonLogger } from '@baton/platform';

/**
 * Dead-letter a refused core NATS request (request/reply has no stream, so no stream sequence):
 * the original bytes go to `<prefix>.dlq.<source>` with the reason, like a refused stream message.
 * The pseudo stream is `core`; the letter's id and sequence are derived from a digest of subject and
 * bytes (`deadLetter`), so the same bad request sent twice within the DLQ's duplicate window is
 * stored once. The letter keeps the request's first {@link REFUSED_LETTER_BYTES} bytes, as the
 * ledger's letters of refused requests do (`Baton-Dlq-Truncated`, `Baton-Dlq-Sha256` and the detail
 * say how much there was): a core request is never redriven (`core_request`), its sender sends
 * again, and a refused request of up to 256 KiB must not push other letters out of the shared
 * stream. Never throws: a DLQ that cannot be reached is logged (the caller still gets its typed
 * rejection reply).
 */
export async function deadLetterRequest(
  nats: NatsHandle,
  logger: JsonLogger,
  input: {
    prefix: string;
    source: string;
    /** The router instance that refused the request (no consumer read it): its `Baton-Dlq-Consumer`. */
    consumer: string;
    reason: string;
    detail: string;
    subject: string;
    headers: Record<string, string[]>;
    data: Uint8Array;
  },
): Promise<void> {
  const letter: DeadLetterInput = {
    prefix: input.prefix,
    source: input.source,
    reason: input.reason,
    detail: input.detail,
    subject: input.subject,
    headers: input.headers,
    data: input.data,
    deliveries: 1,
    stream: 'core',
    seq: 0,
    consumer: input.consumer,
    keepBytes: REFUSED_LETTER_BYTES,
  };
  // The services' one dead-letter line (docs/sre.md): found by source, project, trace and the ids the body names.
  logger.warn('message dead-lettered', { ...letterLogFields(letter), refused: 'request refused' });
  try {
    await deadLetter(nats.js, letter);
  } catch (error) {
    logger.error('cannot dead-letter a refused request', { subject: input.subject, reason: input.reason, err: String(error) });
  }
}
