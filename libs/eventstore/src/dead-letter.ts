import { headers as natsHeaders, type JetStreamClient, type MsgHdrs } from 'nats';
import { Subjects, isSubjectToken } from '@baton/contracts';
import { mapPublishError } from './errors';

/** Headers a dead letter carries next to the original bytes. */
export const DlqHeader = {
  reason: 'Baton-Dlq-Reason',
  detail: 'Baton-Dlq-Detail',
  source: 'Baton-Dlq-Source',
  subject: 'Baton-Dlq-Subject',
  stream: 'Baton-Dlq-Stream',
  seq: 'Baton-Dlq-Seq',
  consumer: 'Baton-Dlq-Consumer',
  deliveries: 'Baton-Dlq-Deliveries',
  /** The original headers as a JSON object of arrays, to restore on redrive. */
  headers: 'Baton-Dlq-Headers',
  at: 'Baton-Dlq-At',
} as const;

/** Why a message was dead-lettered. Handlers may use their own codes (e.g. a rejection code). */
export const DeadLetterReason = {
  poison: 'poison',
  malformedJson: 'malformed_json',
  schemaViolation: 'schema_violation',
  maxDeliveries: 'max_deliveries',
  noHandler: 'no_handler',
} as const;
export type DeadLetterReason = (typeof DeadLetterReason)[keyof typeof DeadLetterReason];

export interface DeadLetterInput {
  /** Subject prefix, e.g. `baton`. */
  prefix: string;
  /** Which consumer gave up (one subject token, e.g. `router-results`). */
  source: string;
  /** Stable reason code (see {@link DeadLetterReason}). */
  reason: string;
  /** Human-readable detail (the error message); truncated to 1,000 characters. */
  detail?: string;
  /** Where the original message was published. */
  subject: string;
  headers?: Record<string, string[]>;
  data: Uint8Array;
  deliveries: number;
  stream: string;
  seq: number;
  consumer?: string;
  /** ISO time of the decision (defaults to now). */
  at?: string;
}

export interface DeadLetterAck {
  subject: string;
  seq: number;
  duplicate: boolean;
}

/** Header values may not hold CR or LF; keep them on one line and bounded. */
function headerValue(value: string, max = 1000): string {
  const flat = value.replace(/[\r\n]+/g, ' ');
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** Subject token for a dead-letter source: anything outside [A-Za-z0-9_-] becomes `_`. */
export function dlqSourceToken(source: string): string {
  const token = source.replace(/[^A-Za-z0-9_-]/g, '_');
  return isSubjectToken(token) ? token : 'unknown';
}

/** Copy a message's headers into a plain record (for the runner, the transport and DLQ redrive). */
export function headersToRecord(hdrs: MsgHdrs | undefined): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  if (!hdrs) return out;
  for (const key of hdrs.keys()) out[key] = hdrs.values(key);
  return out;
}

/**
 * Publish a dead letter to `<prefix>.dlq.<source>`: the original bytes as data, the reason,
 * original subject, stream, sequence, delivery count and original headers as `Baton-Dlq-*`
 * headers. Idempotent: `Nats-Msg-Id` is `dlq:<stream>:<seq>`, so dead-lettering the same message
 * twice (e.g. after a crash between the publish and the term) stores it once. Resolves once the
 * DLQ stream acknowledged it; throws (and the caller must not term the original) otherwise.
 */
export async function deadLetter(js: JetStreamClient, input: DeadLetterInput): Promise<DeadLetterAck> {
  const subject = Subjects.deadLetter(input.prefix, dlqSourceToken(input.source));
  const hdrs = natsHeaders();
  hdrs.set(DlqHeader.reason, headerValue(input.reason, 200));
  if (input.detail) hdrs.set(DlqHeader.detail, headerValue(input.detail));
  hdrs.set(DlqHeader.source, headerValue(input.source, 200));
  hdrs.set(DlqHeader.subject, input.subject);
  hdrs.set(DlqHeader.stream, input.stream);
  hdrs.set(DlqHeader.seq, String(input.seq));
  hdrs.set(DlqHeader.deliveries, String(input.deliveries));
  if (input.consumer) hdrs.set(DlqHeader.consumer, input.consumer);
  hdrs.set(DlqHeader.headers, JSON.stringify(input.headers ?? {}));
  hdrs.set(DlqHeader.at, input.at ?? new Date().toISOString());
  try {
    const ack = await js.publish(subject, input.data, { msgID: `dlq:${input.stream}:${input.seq}`, headers: hdrs });
    return { subject, seq: ack.seq, duplicate: ack.duplicate };
  } catch (err) {
    throw mapPublishError(err, subject, undefined);
  }
}
