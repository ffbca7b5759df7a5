import { createHash } from 'node:crypto';
import { headers as natsHeaders, type JetStreamClient, type MsgHdrs } from 'nats';
import { clipText, IdSchema, Limits, projectOfSubject, Subjects, SubjectTable, isSubjectToken, setOwn } from '@baton/contracts';
import { readableDlqSource } from './dlq-sources';
import { mapPublishError } from './errors';
import { maxPayloadOf } from './pull-size';
import { traceIdFromHeaders } from './trace-context';

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
  /**
   * Set when the letter could not hold the original whole within the server's `max_payload`, or
   * holds only the first `keepBytes` its writer keeps: the original's size in bytes. Its headers are
   * then left out (unless they fit beside the kept bytes), and its bytes cut; {@link DlqHeader.sha256} still names the whole original. Such a letter is never redriven.
   */
  truncated: 'Baton-Dlq-Truncated',
  /** SHA-256 (hex) of the original's whole bytes, on a truncated letter. */
  sha256: 'Baton-Dlq-Sha256',
} as const;

/** Why a message was dead-lettered. Handlers may use their own codes (e.g. a rejection code). */
export const DeadLetterReason = {
  poison: 'poison',
  /** The bytes are not UTF-8 (never decoded with replacement characters). */
  invalidUtf8: 'invalid_utf8',
  malformedJson: 'malformed_json',
  schemaViolation: 'schema_violation',
  maxDeliveries: 'max_deliveries',
  noHandler: 'no_handler',
  /**
   * An inbox message whose `Nats-Msg-Id` names another project or message kind than its subject
   * (`foreignMsgId` in @baton/contracts): an attempt to take another project's id first.
   */
  msgIdMismatch: 'msg_id_mismatch',
  /**
   * A request whose reply subject is not under its sender's own inbox prefix (`mayReplyTo` in
   * @baton/contracts): answering it would publish on the sender's behalf where it may not.
   */
  replyNotAllowed: 'reply_not_allowed',
  /**
   * One letter standing for refused messages of one sender that were not written as letters of
   * their own, its budget of letters for the window spent (`RefusedLetters` in @baton/platform: the
   * ledger's agent edge and commands, agents' inbox messages): how many, for which reasons, the
   * first and last subjects, and for messages a stream stored that stream and their sequences. A
   * flood is recorded, summed up, without pushing other letters out of the shared stream. Only what
   * redrive would not republish is summed up: a stored message whose letter redrive would take
   * (`redrivableLetter`) always gets its own. Never redriven itself (`summary_letter`).
   */
  refusalsSuppressed: 'refusals_suppressed',
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
  /**
   * The stream the original was read from, or `core` for a core NATS request (no stream stores
   * it; `core-…` is read the same way).
   */
  stream: string;
  /** Its stream sequence (ignored for a core request). */
  seq: number;
  consumer?: string;
  /** ISO time of the decision (defaults to now). */
  at?: string;
  /**
   * Which of several letters about one message this is, when one consumer may write more than
   * one (a reaction per refused command): part of the letter's id, so each is stored.
   */
  part?: string;
  /**
   * The reply subject a refused core message asked to be answered on, when it is why the message
   * was refused (`reply_not_allowed`): part of the letter's id, so the same bytes tried under
   * another reply are a letter of their own.
   */
  reply?: string;
  /**
   * Keep at most this many of the original's bytes (a record that is never redriven: a refused
   * agent message must not push other letters out of the shared stream); a cut letter says so as
   * an oversized one does (`Baton-Dlq-Truncated`, `Baton-Dlq-Sha256`) and in its detail.
   */
  keepBytes?: number;
}

/** What the letter of a refused agent message (edge or ledger request) keeps of its bytes. */
export const REFUSED_LETTER_BYTES = 4096;

export interface DeadLetterAck {
  subject: string;
  seq: number;
  duplicate: boolean;
}

/** Header values may not hold CR or LF; keep them on one line and bounded. */
function headerValue(value: string, max = 1000): string {
  return clipText(value.replace(/[\r\n]+/g, ' '), max);
}

/**
 * Subject token for a dead-letter source: anything outside [A-Za-z0-9_-] becomes `_`. Tokens that
 * start with `_` are Baton's own (`<prefix>.dlq._redriven` holds redrive markers, which only the
 * admin may publish) and `redriven` was the marker token before them: a source that would land on
 * one of them is written as `unknown`.
 */
export function dlqSourceToken(source: string): string {
  const token = source.replace(/[^A-Za-z0-9_-]/g, '_');
  if (token.startsWith('_') || token === 'redriven') return 'unknown';
  return isSubjectToken(token) ? token : 'unknown';
}

/** True when a dead letter's `stream` names a core NATS request rather than a stream. */
export function isCoreRequestStream(stream: string): boolean {
  return stream === 'core' || stream.startsWith('core-');
}

/**
 * The `Nats-Msg-Id` a dead letter is published with, so the DLQ stores a message dead-lettered
 * twice by one consumer (a crash between the dead letter and the term, a consumer re-created after
 * it was lost, two instances) once within its duplicate window: `dlq:<source>:<stream>:<seq>` for
 * a stream message, `dlq:<source>:core:<first 40 hex of the SHA-256 of subject, newline, bytes>` for a core request (it has
 * no sequence), with `:<part>` when one consumer writes several letters about one message. The
 * source is in the id: every consumer of the events stream reads the same sequences, and two of
 * them giving up on one event are two letters, each redriven to its own consumer.
 */
export function deadLetterMsgId(input: {
  source: string;
  stream: string;
  seq: number;
  subject: string;
  data: Uint8Array;
  part?: string;
  reply?: string;
}): string {
  const reply = input.reply === undefined ? '' : `:reply-${createHash('sha256').update(input.reply).digest('hex').slice(0, 16)}`;
  const part = `${input.part === undefined ? '' : `:${input.part}`}${reply}`;
  const source = dlqSourceToken(input.source);
  if (!isCoreRequestStream(input.stream)) return `dlq:${source}:${input.stream}:${input.seq}${part}`;
  return `dlq:${source}:core:${coreRequestDigest(input.subject, input.data).slice(0, 40)}${part}`;
}

/**
 * The SHA-256 (hex) of a core request's subject, a newline and its bytes: it names the letter of a
 * refused request (which has no stream sequence), and its first 48 bits stand for the sequence in
 * `Baton-Dlq-Seq`, so the same request refused twice is one letter whoever writes it.
 */
function coreRequestDigest(subject: string, data: Uint8Array): string {
  return createHash('sha256').update(subject).update('\n').update(data).digest('hex');
}

/** Copy a message's headers into a plain record (for the runner, the transport and DLQ redrive). */
export function headersToRecord(hdrs: MsgHdrs | undefined): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  if (!hdrs) return out;
  for (const key of hdrs.keys()) setOwn(out, key, hdrs.values(key));
  return out;
}

/**
 * What a letter's own headers may take beside the original's bytes and headers (reason, detail —
 * at most {@link headerValue}'s cap —, subject, stream, …) and the protocol's framing.
 */
const LETTER_OVERHEAD_BYTES = 8 * 1024;

/** The most the original's headers (as JSON) may take in a letter: a stream refuses a header block over 64 KiB. */
const MAX_LETTER_HEADERS_BYTES = 48 * 1024;

/**
 * Publish a dead letter to `<prefix>.dlq.<source>`: the original bytes as data, the reason,
 * original subject, stream, sequence, delivery count and original headers as `Baton-Dlq-*`
 * headers. Idempotent: `Nats-Msg-Id` is {@link deadLetterMsgId} (source stream and sequence, or a
 * digest of a core request's subject and bytes), so dead-lettering the same message twice stores it
 * once within the DLQ's duplicate window. Resolves once the DLQ stream acknowledged it; throws
 * (and the caller must not term the original) otherwise.
 */
export async function deadLetter(js: JetStreamClient, input: DeadLetterInput): Promise<DeadLetterAck> {
  const subject = Subjects.deadLetter(input.prefix, dlqSourceToken(input.source));
  const hdrs = natsHeaders();
  hdrs.set(DlqHeader.reason, headerValue(input.reason, 200));
  const cut = input.keepBytes !== undefined && input.data.length > input.keepBytes;
  const detail = cut ? `${input.detail ?? ''} (first ${input.keepBytes} of ${input.data.length} bytes kept)`.trim() : input.detail;
  if (detail) hdrs.set(DlqHeader.detail, headerValue(detail));
  hdrs.set(DlqHeader.source, headerValue(input.source, 200));
  hdrs.set(DlqHeader.subject, input.subject);
  hdrs.set(DlqHeader.stream, isCoreRequestStream(input.stream) ? 'core' : input.stream);
  const core = isCoreRequestStream(input.stream);
  hdrs.set(DlqHeader.seq, String(core ? parseInt(coreRequestDigest(input.subject, input.data).slice(0, 12), 16) : input.seq));
  hdrs.set(DlqHeader.deliveries, String(input.deliveries));
  if (input.consumer) hdrs.set(DlqHeader.consumer, input.consumer);
  hdrs.set(DlqHeader.at, input.at ?? new Date().toISOString());
  // A letter must fit in one message (and its header block in 64 KiB), or it can never be written
  // and its original is never settled. The original's headers go first (JSON can grow a header
  // value sixfold), then bytes.
  const originalHeaders = JSON.stringify(input.headers ?? {});
  const headersBytes = Buffer.byteLength(originalHeaders);
  const room = maxPayloadOf(js) - LETTER_OVERHEAD_BYTES;
  let data = input.data;
  const keep = Math.min(room, input.keepBytes ?? room);
  if (headersBytes <= MAX_LETTER_HEADERS_BYTES && data.length + headersBytes <= room && data.length <= keep) hdrs.set(DlqHeader.headers, originalHeaders);
  else {
    hdrs.set(DlqHeader.headers, headersBytes <= MAX_LETTER_HEADERS_BYTES && keep + headersBytes <= room ? originalHeaders : '{}');
    hdrs.set(DlqHeader.truncated, String(data.length));
    hdrs.set(DlqHeader.sha256, createHash('sha256').update(data).digest('hex'));
    if (data.length > keep) data = data.subarray(0, keep);
  }
  try {
    const ack = await js.publish(subject, data, { msgID: deadLetterMsgId(input), headers: hdrs });
    return { subject, seq: ack.seq, duplicate: ack.duplicate };
  } catch (err) {
    throw mapPublishError(err, subject, undefined);
  }
}

/**
 * What a dead letter's original names, to find the letters of a project, a run or a handoff: the
 * project of its subject, and the ids its body names. Read from the original alone (subject and
 * bytes), the same for the service's log line when it dead-letters a message
 * ({@link deadLetterLogFields}) and for `baton dlq list --project / --run / --handoff`.
 */
export interface DeadLetterRefs {
  /** The project of the original subject (`<prefix>.in.<project>.…`, `.ev.<project>.…`, `.cmd.<service>.<project>.…`, `.edge.<project>.…`). */
  project?: string;
  workflow_run_id?: string;
  handoff_id?: string;
  mesh_run_id?: string;
  result_id?: string;
}

/** The ids {@link deadLetterRefs} reads from a body, by the field that names each. */
export const DEAD_LETTER_ID_FIELDS = ['workflow_run_id', 'handoff_id', 'mesh_run_id', 'result_id'] as const;
type IdField = (typeof DEAD_LETTER_ID_FIELDS)[number];

/**
 * The most bytes of a body {@link deadLetterRefs} parses: the size cap of every message Baton
 * takes. A larger body (a `payload_too_large` letter, a forged one) is not read for ids: the work
 * per letter stays bounded whatever the DLQ holds.
 */
export const DEAD_LETTER_REFS_MAX_BYTES = Limits.maxMessageBytes;

/** The aggregate kinds whose id is one of the ids a letter is found by. */
const AGGREGATE_ID_FIELD: Readonly<Record<string, IdField>> = { run: 'workflow_run_id', handoff: 'handoff_id', mesh: 'mesh_run_id' };

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** The own field `key` of `value` when it is a valid id, else undefined. */
function idAt(value: Record<string, unknown>, key: string): string | undefined {
  if (!Object.hasOwn(value, key)) return undefined;
  const id = value[key];
  return typeof id === 'string' && IdSchema.safeParse(id).success ? id : undefined;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The body as a JSON object, or null: not UTF-8, not JSON, not an object, or over {@link DEAD_LETTER_REFS_MAX_BYTES}. Never throws. */
function bodyObject(data: Uint8Array): Record<string, unknown> | null {
  if (data.length === 0 || data.length > DEAD_LETTER_REFS_MAX_BYTES) return null;
  try {
    const value: unknown = JSON.parse(strictUtf8.decode(data));
    return isPlainObject(value) ? value : null;
  } catch {
    return null;
  }
}

/**
 * The project of a dead letter's original subject and the ids its body names
 * ({@link DeadLetterRefs}). Tolerant: a body that is not UTF-8, not JSON, not an object, or larger
 * than {@link DEAD_LETTER_REFS_MAX_BYTES} names no ids, and a field that is not a valid id
 * (`IdSchema`) is left out; it never throws. Read from the body's own top-level fields, then — for a
 * stored event — its aggregate (`aggregate.kind` run, handoff or mesh names that id) and its
 * payload's top-level fields, and — for a handoff offered to an agent — the record's `id`.
 */
export function deadLetterRefs(prefix: string, subject: string, data: Uint8Array): DeadLetterRefs {
  const refs: DeadLetterRefs = {};
  const project = projectOfSubject(prefix, subject);
  if (project !== undefined) refs.project = project;
  const body = bodyObject(data);
  if (body === null) return refs;
  const fill = (field: IdField, id: string | undefined) => {
    if (id !== undefined && refs[field] === undefined) refs[field] = id;
  };
  for (const field of DEAD_LETTER_ID_FIELDS) fill(field, idAt(body, field));
  const aggregate = Object.hasOwn(body, 'aggregate') ? body['aggregate'] : undefined;
  if (isPlainObject(aggregate) && typeof aggregate['kind'] === 'string' && Object.hasOwn(AGGREGATE_ID_FIELD, aggregate['kind']))
    fill(AGGREGATE_ID_FIELD[aggregate['kind']]!, idAt(aggregate, 'id'));
  const payload = Object.hasOwn(body, 'payload') ? body['payload'] : undefined;
  if (isPlainObject(payload)) for (const field of DEAD_LETTER_ID_FIELDS) fill(field, idAt(payload, field));
  if (SubjectTable.offer.parse(prefix, subject) !== null) fill('handoff_id', idAt(body, 'id'));
  return refs;
}

/** How many characters of the error a dead-lettering's log line keeps (`detail`). */
export const DEAD_LETTER_LOG_DETAIL_CHARS = 500;

/** An error as a letter's detail and a dead-lettering's log line say it: `<name>: <message>`. */
export function errorText(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  if (typeof error === 'object' && error !== null) {
    try {
      return JSON.stringify(error);
    } catch {
      return String(error);
    }
  }
  return String(error);
}

/** What {@link deadLetterLogFields} needs: the consumer, the message and why it was given up on. */
export interface DeadLetterLogInput {
  prefix: string;
  /** The dead-letter source the consumer writes its letters under. */
  source: string;
  /** The durable consumer. */
  durable?: string;
  /** The letter's reason (its code); absent when the letter itself could not be written. */
  reason?: string;
  /** The handler's error (the letter's detail). */
  error: unknown;
  subject: string;
  /** Stream sequence of the message. */
  seq: number;
  headers?: Record<string, string[]>;
  data: Uint8Array;
}

/**
 * The fields of a service's log line about a message it dead-letters, so the line is found by
 * what an SRE knows: `source` (the consumer's readable name, as `baton dlq list` and
 * `baton_dead_letters_total` name it), `durable`, `reason` (the code), `detail` (the error, on one
 * line, clipped to {@link DEAD_LETTER_LOG_DETAIL_CHARS}), `subject`, `stream_seq`, `project` (of
 * the subject), `trace_id` (of the message's `traceparent`, when valid) and the ids its body names
 * ({@link deadLetterRefs}). Never throws; bounded work whatever the body.
 */
export function deadLetterLogFields(input: DeadLetterLogInput): Record<string, string | number> {
  const { project, ...ids } = deadLetterRefs(input.prefix, input.subject, input.data);
  const traceId = traceIdFromHeaders(input.headers);
  const fields: Record<string, string | number> = { source: readableDlqSource(input.source) };
  if (input.durable !== undefined) fields['durable'] = input.durable;
  if (input.reason !== undefined) fields['reason'] = headerValue(input.reason, 200);
  // Cut long before the clip (a surrogate pair the cut splits lies past what the clip keeps): the
  // line's work stays bounded whatever the error's size.
  fields['detail'] = headerValue(errorText(input.error).slice(0, 4 * DEAD_LETTER_LOG_DETAIL_CHARS), DEAD_LETTER_LOG_DETAIL_CHARS);
  fields['subject'] = input.subject;
  fields['stream_seq'] = input.seq;
  if (project !== undefined) fields['project'] = project;
  if (traceId !== null) fields['trace_id'] = traceId;
  for (const field of DEAD_LETTER_ID_FIELDS) if (ids[field] !== undefined) fields[field] = ids[field];
  return fields;
}

/**
 * The same fields for a letter a service writes itself, not a consumer's: a refused core request
 * (a ledger command, a definition) or agent edge message. Its `detail` is the refusal's; a core
 * message has no stream sequence, so the line names none.
 */
export function letterLogFields(letter: DeadLetterInput): Record<string, string | number> {
  const fields = deadLetterLogFields({
    prefix: letter.prefix,
    source: letter.source,
    reason: letter.reason,
    error: letter.detail ?? letter.reason,
    subject: letter.subject,
    seq: letter.seq,
    ...(letter.headers !== undefined ? { headers: letter.headers } : {}),
    data: letter.data,
  });
  if (letter.stream === 'core' || letter.stream.startsWith('core-')) delete fields['stream_seq'];
  // A consumer's letter (one a gate logs for it) names its durable, as the consumer's own line does.
  else if (letter.consumer !== undefined) fields['durable'] = letter.consumer;
  return fields;
}
