import { createHash } from 'node:crypto';
import { IdSchema, ProjectIdSchema, SubjectTable, foreignMsgId, projectOfSubject } from '@baton/contracts';
import { headers as natsHeaders, type JetStreamClient, type JetStreamManager } from 'nats';
import { DEAD_LETTER_REFS_MAX_BYTES, DlqHeader, deadLetterRefs, type DeadLetterRefs } from './dead-letter';
import { DlqSources, readableDlqSource, sameDlqSource } from './dlq-sources';
import { publishUnderOwnId } from './own-id-publish';
import { RedriveSkip, checkRedriveTarget, msgIdOf } from './redrive-rules';
import { streamReader, type StoredMessage, type StreamReader } from './stream-reader';
import { batonStreamNames } from './topology';

export {
  RedriveSkip,
  checkRedriveTarget,
  isRefusedMessageReason,
  redrivableLetter,
  redriveTable,
  REFUSED_MESSAGE_REASONS,
  ROUTER_INBOX_CONSUMERS,
} from './redrive-rules';
export type { InboxConsumerDeclaration, RedriveRuleOptions, RedriveTableRow, RedriveTargetVerdict } from './redrive-rules';

/**
 * Administration of the dead-letter stream `<PREFIX>_DLQ`: list, show and redrive.
 *
 * A dead letter is only a claim: anyone who may publish on `<prefix>.dlq.<source>` can write one
 * with any `Baton-Dlq-*` headers. So a redrive republishes a letter only when
 * 1. its subject is one the recorded source consumes on the inbox ({@link checkRedriveTarget}:
 *    never an event, an operator answer or a core request), and
 * 2. the original it names (`Baton-Dlq-Stream` = `<PREFIX>_INBOX`, `Baton-Dlq-Seq`) is still in
 *    the inbox with the same subject and the same bytes; it is republished with the headers the
 *    stream stored, not the ones the letter claims. An original that aged out is skipped
 *    (`original_gone`) unless the caller allows it (`allowMissingOriginal`: the letter's bytes and
 *    headers are taken on trust).
 * A letter whose reason says the message itself was refused (`schema_violation`,
 * `malformed_json`…: `REFUSED_MESSAGE_REASONS`) is skipped (`message_refused`) unless the caller
 * includes refused messages (`includeRefused`): the same bytes would be refused again. A
 * `refusals_suppressed` letter holds no message, only a count of them: it is skipped
 * (`summary_letter`) with a detail saying where its messages are.
 *
 * Redrive record: after a republish a marker is appended to the DLQ stream itself on
 * `<prefix>.dlq._redriven` (a subject only the admin principal may publish; no service's
 * dead-letter source can map to it, see `dlqSourceToken`). Its JSON body names the letter's DLQ
 * sequence and a SHA-256 digest of the letter (DLQ subject, headers, bytes); a letter counts as
 * redriven only when a marker on that subject names its sequence and matches its digest. Markers on
 * any other subject (including `<prefix>.dlq.redriven`, the unverifiable markers of earlier
 * versions) are ignored. No other store (no Redis) is involved.
 */

/** Headers of the redrive marker and of a redriven message. */
export const DlqRedriveHeader = {
  /** On a marker (informational; the body is what counts): the DLQ sequence that was redriven. */
  redrivenSeq: 'Baton-Dlq-Redriven-Seq',
  /** On a marker: when. */
  redrivenAt: 'Baton-Dlq-Redriven-At',
  /** On the republished message: `<DLQ stream>:<seq>` it came from. */
  redrivenFrom: 'Baton-Redriven-From',
  /** On the republished message: the original `Nats-Msg-Id`, kept for tracing. */
  originalMsgId: 'Baton-Original-Msg-Id',
} as const;

/** Source token of the redrive markers (`<prefix>.dlq._redriven`). Only the admin principal may publish it. */
export const REDRIVE_MARKER_SOURCE = '_redriven';
/** Token of the markers written before they were verified; read as nothing. */
const LEGACY_MARKER_SOURCE = 'redriven';

/** The subject redrive markers are written on. */
export function redriveMarkerSubject(prefix: string): string {
  return `${prefix}.dlq.${REDRIVE_MARKER_SOURCE}`;
}

/** The body of a redrive marker. */
export interface RedriveMarker {
  /** DLQ stream the letter is in. */
  dlq_stream: string;
  /** The letter's DLQ sequence. */
  dlq_seq: number;
  /** {@link letterDigest} of the letter when it was redriven. */
  letter_digest: string;
  /** Where it was republished, and at which sequence. */
  target_subject: string;
  target_seq: number;
  at: string;
}

/** One dead letter as stored in `<PREFIX>_DLQ`. */
export interface DeadLetterRecord {
  /** Sequence in the DLQ stream (the id `baton dlq show` takes). */
  seq: number;
  /** DLQ subject, `<prefix>.dlq.<source>`. */
  dlqSubject: string;
  reason: string;
  detail?: string;
  /** Which consumer gave up, as the letter records it (`Baton-Dlq-Source`). */
  source: string;
  /**
   * Its readable name: the same as `source`, or — for a letter written before readable source
   * names — the readable name of the durable (or older source) it records (`router-results` for
   * `router__prefix__in_any_result_any_4f0c0a3d`).
   */
  sourceName: string;
  /** Where the original was published (the redrive target). */
  subject: string;
  /**
   * The project of the original subject ({@link letterProject}: `<prefix>.in.<project>.…`,
   * `.ev.<project>.…`, `.cmd.<service>.<project>.…`, `.edge.<project>.…`): what `--project`
   * matches; undefined for a subject that names none.
   */
  project?: string;
  /** Stream and sequence of the original (`core` for a core NATS request). */
  originalStream?: string;
  originalSeq?: number;
  deliveries?: number;
  consumer?: string;
  /** When it was dead-lettered (ISO). */
  at?: string;
  /** The original headers as the letter records them (empty when they did not decode, or were left out). */
  headers: Record<string, string[]>;
  /**
   * The original's size in bytes when the letter could not hold it whole (its headers left out, its
   * bytes cut to fit `max_payload`): such a letter is kept for reading, never redriven.
   */
  truncated?: number;
  /** The original bytes. */
  data: Uint8Array;
  /** SHA-256 of the letter as stored (DLQ subject, headers, bytes): what a redrive marker names. */
  digest: string;
  /** True when a verified redrive marker names this letter. */
  redriven: boolean;
  /**
   * A letter of the webhook consumers (`notifier-webhooks`, `notifier-mesh-webhooks`): the notice a
   * webhook never took, read from the notice event the letter holds ({@link letterNotice}). Such a
   * letter is never redriven: the notice is sent again with {@link noticeRedeliverCommand}.
   */
  notice?: DeadLetterNotice;
}

/**
 * The project of a dead letter's original subject, as {@link deadLetterRefs} reads it: the one
 * function the `--project` filter and the letter's `project` (list, show, `--json`) both use.
 */
export function letterProject(prefix: string, subject: string): string | undefined {
  return projectOfSubject(prefix, subject);
}

/**
 * What {@link DlqAdmin.at} found at a sequence of the DLQ stream: a dead letter; a redrive marker
 * (`<prefix>.dlq._redriven`: `marker` is its body, null when it is not one a redrive wrote;
 * `counts` whether the letter it names still has the digest it names, i.e. is shown redriven); a
 * marker of an earlier version (`<prefix>.dlq.redriven`, ignored: it proves nothing); or null when
 * the stream holds nothing there (never written, or deleted).
 */
export type DlqEntry =
  | { kind: 'letter'; seq: number; letter: DeadLetterRecord }
  | { kind: 'redrive_marker'; seq: number; subject: string; marker: RedriveMarker | null; counts: boolean }
  | { kind: 'legacy_redrive_marker'; seq: number; subject: string; marksSeq: number | null; at: string | null };

/** The notice a webhook consumer's dead letter holds: what `baton notice redeliver` takes. */
export interface DeadLetterNotice {
  project: string;
  noticeId: string;
}

/** The sources whose letters are notices a webhook never took. */
const WEBHOOK_SOURCES: ReadonlySet<string> = new Set([DlqSources.notifierWebhooks, DlqSources.notifierMeshWebhooks]);
/** The events those consumers deliver. */
const NOTICE_EVENTS: ReadonlySet<unknown> = new Set(['run.notice_emitted', 'mesh.notice_emitted']);
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

const objectAt = (value: unknown, key: string): Record<string, unknown> | undefined => {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || !Object.hasOwn(value, key)) return undefined;
  const at = (value as Record<string, unknown>)[key];
  return typeof at === 'object' && at !== null && !Array.isArray(at) ? (at as Record<string, unknown>) : undefined;
};

/**
 * The notice of a webhook consumer's letter (source `notifier-webhooks` or
 * `notifier-mesh-webhooks`, by its readable name): the stored `run.notice_emitted` /
 * `mesh.notice_emitted` event it holds names the notice's id and project. Undefined for a letter of
 * another source, and for bytes that are not such an event (cut short, not UTF-8 or JSON, over
 * {@link DEAD_LETTER_REFS_MAX_BYTES}, ids that are not valid): never throws.
 */
export function letterNotice(sourceName: string, data: Uint8Array): DeadLetterNotice | undefined {
  if (!WEBHOOK_SOURCES.has(sourceName) || data.length === 0 || data.length > DEAD_LETTER_REFS_MAX_BYTES) return undefined;
  let event: unknown;
  try {
    event = JSON.parse(strictUtf8.decode(data));
  } catch {
    return undefined;
  }
  if (typeof event !== 'object' || event === null || !NOTICE_EVENTS.has((event as { type?: unknown }).type)) return undefined;
  const notice = objectAt(objectAt(event, 'payload'), 'notice');
  const noticeId = IdSchema.safeParse(notice?.['notice_id']);
  const project = ProjectIdSchema.safeParse(notice?.['project']);
  return noticeId.success && project.success ? { project: project.data, noticeId: noticeId.data } : undefined;
}

/** The command that sends a dead-lettered notice to the webhooks again (ids hold no character a shell reads). */
export function noticeRedeliverCommand(notice: DeadLetterNotice): string {
  return `baton notice redeliver ${notice.noticeId} --project ${notice.project}`;
}

export interface DlqFilter {
  /**
   * Only dead letters of this source (the `Baton-Dlq-Source` header or the subject token); a
   * readable name also matches the letters its consumer wrote under its durable name before.
   */
  source?: string;
  /** Only dead letters with this reason code. */
  reason?: string;
  /** Only sequences up to and including this one. */
  untilSeq?: number;
  /** Only dead letters whose original subject is in this project ({@link deadLetterRefs}). */
  project?: string;
  /** Only dead letters whose original body names this run: its `workflow_run_id` or `mesh_run_id` ({@link deadLetterRefs}). */
  run?: string;
  /** Only dead letters whose original body names this handoff (`handoff_id`; {@link deadLetterRefs}). */
  handoff?: string;
}

export interface DlqAdminOptions {
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** Subject prefix, e.g. `baton`. */
  prefix: string;
}

export interface RedriveOptions {
  /** List what would be republished; change nothing. */
  dryRun?: boolean;
  /**
   * Redrive letters whose original aged out of the inbox stream (or was deleted), taking their
   * bytes and headers on trust. Without it they are skipped (`original_gone`).
   */
  allowMissingOriginal?: boolean;
  /**
   * Redrive letters whose reason says the message itself was refused (`schema_violation`,
   * `malformed_json`…: `REFUSED_MESSAGE_REASONS`), unchanged. Without it they are skipped
   * (`message_refused`): the same bytes would be refused again.
   */
  includeRefused?: boolean;
}

/** What one redrive did to one dead letter. */
export interface RedriveItem {
  seq: number;
  source: string;
  subject: string;
  /** The letter's own reason (`Baton-Dlq-Reason`: why its consumer gave up on the message), whatever the redrive did with it. */
  letterReason: string;
  /**
   * `redriven`: republished now; `duplicate`: the target stream had it already (same redrive msg
   * id, a redrive cut short before its marker); `skipped`: see `reason`; `planned`: dry run.
   */
  status: 'redriven' | 'duplicate' | 'skipped' | 'planned';
  /** Why it was skipped. */
  reason?: RedriveSkip;
  /** More about the reason, or a warning (a marker that could not be written, an unverified original). */
  detail?: string;
  /** Whether the original was found in the inbox and matched (`matched`) or had aged out (`gone`, only with `allowMissingOriginal`). */
  original?: 'matched' | 'gone';
  /** Sequence in the target stream (redriven / duplicate). */
  targetSeq?: number;
}

export interface RedriveReport {
  items: RedriveItem[];
  redriven: number;
  duplicates: number;
  skipped: number;
  planned: number;
}

/** The `Nats-Msg-Id` a redrive of DLQ sequence `seq` publishes with: stable, so a repeat is a duplicate. */
export function redriveMsgId(dlqStream: string, seq: number): string {
  return `redrive:${dlqStream}:${seq}`;
}

/** Headers that must not travel with a republished message: server directives of the first publish. */
const DROPPED_HEADERS = /^nats-(msg-id|expected-.*|rollup|ttl)$/i;

function parseHeaderRecord(text: string | undefined): Record<string, string[]> {
  if (!text) return {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return {};
    const out: Record<string, string[]> = Object.create(null) as Record<string, string[]>;
    for (const [key, values] of Object.entries(parsed as Record<string, unknown>)) {
      if (key === '__proto__' || key === 'constructor' || key === 'prototype') continue;
      if (Array.isArray(values)) out[key] = values.filter((v): v is string => typeof v === 'string');
    }
    return { ...out };
  } catch {
    return {};
  }
}

function optionalInt(value: string | undefined): number | undefined {
  if (value === undefined || value === '') return undefined;
  const n = Number(value);
  return Number.isInteger(n) ? n : undefined;
}

/**
 * SHA-256 (hex) of a dead letter as the DLQ stores it: its subject, every header (names in order,
 * values as stored) and its bytes. A redrive marker must name it.
 */
export function letterDigest(dlqSubject: string, headers: Record<string, string[]>, data: Uint8Array): string {
  const names = Object.keys(headers).sort();
  const hash = createHash('sha256').update(dlqSubject).update('\n');
  for (const name of names) hash.update(JSON.stringify([name, headers[name]])).update('\n');
  return hash.update(data).digest('hex');
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.length).equals(Buffer.from(b.buffer, b.byteOffset, b.length));
}

/** A marker body, or null when it is not one. */
function parseMarker(data: Uint8Array): RedriveMarker | null {
  try {
    const body = JSON.parse(new TextDecoder().decode(data)) as Partial<RedriveMarker> | null;
    if (!body || typeof body !== 'object') return null;
    if (typeof body.dlq_seq !== 'number' || !Number.isInteger(body.dlq_seq) || typeof body.letter_digest !== 'string' || typeof body.dlq_stream !== 'string')
      return null;
    return body as RedriveMarker;
  } catch {
    return null;
  }
}

/**
 * Read, inspect and redrive Baton's dead letters. Every method reads the DLQ stream afresh (a range
 * read of the stream reader: an ephemeral, unacknowledged consumer deleted afterwards); nothing is
 * cached.
 */
export class DlqAdmin {
  private readonly js: JetStreamClient;
  private readonly jsm: DlqAdminOptions['jsm'];
  private readonly prefix: string;
  /** The DLQ stream's name, `<PREFIX>_DLQ`. */
  readonly stream: string;
  /** The inbox stream, the only one a redrive publishes into. */
  private readonly inbox: string;
  private readonly dlqReader: StreamReader;
  private readonly inboxReader: StreamReader;

  constructor(opts: DlqAdminOptions) {
    this.js = opts.js;
    this.jsm = opts.jsm;
    this.prefix = opts.prefix;
    const names = batonStreamNames(opts.prefix);
    this.stream = names.dlq;
    this.inbox = names.inbox;
    this.dlqReader = streamReader({ js: opts.js, jsm: opts.jsm }, this.stream);
    this.inboxReader = streamReader({ js: opts.js, jsm: opts.jsm }, this.inbox);
  }

  /**
   * Every dead letter matching `filter`, oldest first, with `redriven` set from the verified
   * markers. Throws StreamNotFound when the DLQ stream does not exist.
   */
  async list(filter: DlqFilter = {}): Promise<DeadLetterRecord[]> {
    const { letters, markers } = await this.scan();
    return letters
      .map((letter) => ({
        ...letter,
        redriven: markers.some((m) => m.dlq_seq === letter.seq && m.letter_digest === letter.digest && m.dlq_stream === this.stream),
      }))
      .filter((letter) => matches(this.prefix, letter, filter));
  }

  /** The dead letter at DLQ sequence `seq`, or null when there is none (or it is a redrive marker: {@link at} says which). */
  async show(seq: number): Promise<DeadLetterRecord | null> {
    const letters = await this.list();
    return letters.find((letter) => letter.seq === seq) ?? null;
  }

  /**
   * What the DLQ stream holds at `seq` ({@link DlqEntry}): a dead letter (with `redriven` as
   * {@link list} sets it), a redrive marker, a marker of an earlier version, or null for nothing.
   * Throws StreamNotFound when the DLQ stream does not exist.
   */
  async at(seq: number): Promise<DlqEntry | null> {
    const msg = await this.dlqReader.message(seq);
    if (msg === null) return null;
    if (msg.subject === redriveMarkerSubject(this.prefix)) {
      const marker = parseMarker(msg.data);
      const named = marker === null || marker.dlq_stream !== this.stream ? null : await this.show(marker.dlq_seq);
      return { kind: 'redrive_marker', seq, subject: msg.subject, marker, counts: named !== null && named.digest === marker?.letter_digest };
    }
    if (msg.subject === `${this.prefix}.dlq.${LEGACY_MARKER_SOURCE}` && msg.data.length === 0 && msg.header(DlqRedriveHeader.redrivenSeq)) {
      return {
        kind: 'legacy_redrive_marker',
        seq,
        subject: msg.subject,
        marksSeq: optionalInt(msg.header(DlqRedriveHeader.redrivenSeq)) ?? null,
        at: msg.header(DlqRedriveHeader.redrivenAt) ?? null,
      };
    }
    const letter = await this.show(seq);
    return letter === null ? null : { kind: 'letter', seq, letter };
  }

  /**
   * Republish each matching dead letter that may be redriven (see the class comment) and is not
   * marked redriven, to its original subject with the headers the inbox stored (minus
   * `Nats-Msg-Id` / `Nats-Expected-*`, directives of the first publish) plus `Baton-Redriven-From`,
   * and `Nats-Msg-Id` = {@link redriveMsgId}; then append the marker. Every letter gets an item:
   * redriven, duplicate, planned (dry run) or skipped with its reason; one that cannot be
   * republished never stops the others. Idempotent: a second run skips marked letters, and if a
   * run died between the republish and the marker, the repeat is recognised as a duplicate by the
   * inbox inside its duplicate window (and by the consumer's own idempotency after it).
   */
  async redrive(filter: DlqFilter = {}, opts: RedriveOptions = {}): Promise<RedriveReport> {
    const letters = await this.list(filter);
    const report: RedriveReport = { items: [], redriven: 0, duplicates: 0, skipped: 0, planned: 0 };
    for (const letter of letters) {
      const item = await this.redriveOne(letter, opts);
      report.items.push(item);
      if (item.status === 'redriven') report.redriven++;
      else if (item.status === 'duplicate') report.duplicates++;
      else if (item.status === 'planned') report.planned++;
      else report.skipped++;
    }
    return report;
  }

  private async redriveOne(letter: DeadLetterRecord, opts: RedriveOptions): Promise<RedriveItem> {
    const base = { seq: letter.seq, source: letter.source, subject: letter.subject, letterReason: letter.reason };
    const skip = (reason: RedriveSkip, detail: string): RedriveItem => ({ ...base, status: 'skipped', reason, detail });
    if (letter.redriven) return skip(RedriveSkip.alreadyRedriven, 'a redrive marker names this letter');
    if (letter.truncated !== undefined) {
      return skip(
        RedriveSkip.truncated,
        `the letter holds ${letter.data.length} of the original's ${letter.truncated} bytes and none of its headers (it did not fit whole)`,
      );
    }
    const target = checkRedriveTarget(this.prefix, letter, { includeRefused: opts.includeRefused === true });
    if (!target.ok) {
      // A notice a webhook never took: the command that sends it, ready to run.
      if (letter.notice === undefined) return skip(target.reason, target.detail);
      const command = noticeRedeliverCommand(letter.notice);
      const placeholder = 'baton notice redeliver <notice_id> --project <p>';
      return skip(
        target.reason,
        target.detail.includes(placeholder) ? target.detail.replace(placeholder, command) : `${target.detail}; send the notice again: ${command}`,
      );
    }

    if (letter.originalStream !== this.inbox || letter.originalSeq === undefined || letter.originalSeq < 1) {
      return skip(
        RedriveSkip.noOriginal,
        `the letter names ${letter.originalStream ?? 'no stream'}:${letter.originalSeq ?? '?'}, not a sequence of ${this.inbox}`,
      );
    }
    let original: StoredMessage | null;
    try {
      original = await this.inboxReader.message(letter.originalSeq);
    } catch (err) {
      return skip(RedriveSkip.originalUnreadable, `cannot read ${this.inbox}:${letter.originalSeq}: ${String((err as Error).message ?? err)}`);
    }
    if (original !== null && (original.subject !== letter.subject || !sameBytes(original.data, letter.data))) {
      return skip(
        RedriveSkip.originalMismatch,
        `${this.inbox}:${letter.originalSeq} holds ${original.subject === letter.subject ? 'other bytes' : `a message on ${original.subject}`}, not what the letter claims`,
      );
    }
    if (original === null && !opts.allowMissingOriginal) {
      return skip(
        RedriveSkip.originalGone,
        `${this.inbox}:${letter.originalSeq} is no longer in the stream (aged out or deleted); --allow-missing-original redrives the letter's bytes unverified`,
      );
    }
    // Checked on the headers the inbox stored (the letter's are only its claim): a message refused
    // for the id it took would be republished under the redrive's id, past the check that refused it.
    const storedHeaders = original === null ? letter.headers : original.headers();
    const foreign = foreignMsgId(this.prefix, letter.subject, msgIdOf(storedHeaders));
    if (foreign !== null) return skip(RedriveSkip.msgIdMismatch, `${foreign}: its publisher sends it again under an id of its own`);
    const checked: Pick<RedriveItem, 'original' | 'detail'> =
      original === null
        ? { original: 'gone', detail: `original ${this.inbox}:${letter.originalSeq} aged out: republished unverified` }
        : { original: 'matched' };
    if (opts.dryRun) return { ...base, status: 'planned', ...checked };

    let ack;
    try {
      // Inside the try: a stored header the client will not send again (a name it refuses) fails
      // this letter's republish, never the whole redrive.
      const hdrs = natsHeaders();
      // A message that was itself a redrive's copy keeps the id it was first published under.
      const originalMsgId = storedHeaders[DlqRedriveHeader.originalMsgId]?.[0] ?? msgIdOf(storedHeaders);
      for (const [key, values] of Object.entries(storedHeaders)) {
        if (DROPPED_HEADERS.test(key)) continue;
        for (const value of values) hdrs.append(key, value);
      }
      hdrs.set(DlqRedriveHeader.redrivenFrom, `${this.stream}:${letter.seq}`);
      if (originalMsgId !== undefined) hdrs.set(DlqRedriveHeader.originalMsgId, originalMsgId);
      // Under its own id (a second redrive of the letter stores nothing) — and not taken on trust: an
      // agent may have published first under that id, which would make the letter look redriven.
      ack = await publishUnderOwnId({ js: this.js, jsm: this.jsm }, letter.subject, letter.data, redriveMsgId(this.stream, letter.seq), {
        headers: hdrs,
        isOwn: (stored) => stored.subject === letter.subject && Buffer.from(stored.data).equals(Buffer.from(letter.data)),
      });
    } catch (err) {
      return skip(RedriveSkip.republishFailed, `publish to ${letter.subject} failed: ${String((err as Error).message ?? err)}`);
    }
    const item: RedriveItem = { ...base, status: ack.duplicate ? 'duplicate' : 'redriven', targetSeq: ack.seq, ...checked };
    try {
      await this.mark(letter, ack.seq);
    } catch (err) {
      const warning = `republished, but the redrive marker was not written (${String((err as Error).message ?? err)}): the next redrive republishes it again`;
      item.detail = item.detail ? `${item.detail}; ${warning}` : warning;
    }
    return item;
  }

  private async mark(letter: DeadLetterRecord, targetSeq: number): Promise<void> {
    const at = new Date().toISOString();
    const marker: RedriveMarker = {
      dlq_stream: this.stream,
      dlq_seq: letter.seq,
      letter_digest: letter.digest,
      target_subject: letter.subject,
      target_seq: targetSeq,
      at,
    };
    const hdrs = natsHeaders();
    hdrs.set(DlqRedriveHeader.redrivenSeq, String(letter.seq));
    hdrs.set(DlqRedriveHeader.redrivenAt, at);
    await this.js.publish(redriveMarkerSubject(this.prefix), new TextEncoder().encode(JSON.stringify(marker)), {
      msgID: `redrive-marker:${this.stream}:${letter.seq}`,
      headers: hdrs,
    });
  }

  /** Read the whole DLQ stream (one range read): dead letters and the redrive markers on the marker subject. */
  private async scan(): Promise<{ letters: DeadLetterRecord[]; markers: RedriveMarker[] }> {
    const letters: DeadLetterRecord[] = [];
    const markers: RedriveMarker[] = [];
    const markerSubject = redriveMarkerSubject(this.prefix);
    const legacyMarkerSubject = `${this.prefix}.dlq.${LEGACY_MARKER_SOURCE}`;
    for await (const msg of this.dlqReader.range({ fromSeq: 1, batch: 256 })) {
      if (msg.subject === markerSubject) {
        const marker = parseMarker(msg.data);
        if (marker) markers.push(marker);
      } else if (msg.subject === legacyMarkerSubject && msg.data.length === 0 && msg.header(DlqRedriveHeader.redrivenSeq)) {
        // A marker of an earlier version: anyone could have written it, so it proves nothing.
      } else {
        letters.push(decodeLetter(this.prefix, msg));
      }
    }
    return { letters, markers };
  }
}

/** The source token of a dead letter's subject (`<prefix>.dlq.<source>`), or '' for another subject. */
function sourceTokenOf(prefix: string, dlqSubject: string): string {
  return SubjectTable.deadLetter.parse(prefix, dlqSubject)?.source ?? '';
}

function decodeLetter(prefix: string, msg: StoredMessage): DeadLetterRecord {
  const hdr = (name: string): string | undefined => msg.header(name);
  const token = sourceTokenOf(prefix, msg.subject);
  const record: DeadLetterRecord = {
    seq: msg.seq,
    dlqSubject: msg.subject,
    reason: hdr(DlqHeader.reason) ?? 'unknown',
    source: hdr(DlqHeader.source) ?? token,
    sourceName: readableDlqSource(hdr(DlqHeader.source) ?? token),
    subject: hdr(DlqHeader.subject) ?? '',
    headers: parseHeaderRecord(hdr(DlqHeader.headers)),
    data: msg.data,
    digest: letterDigest(msg.subject, msg.headers(), msg.data),
    redriven: false,
  };
  const optional: Partial<DeadLetterRecord> = {
    detail: hdr(DlqHeader.detail),
    originalStream: hdr(DlqHeader.stream),
    originalSeq: optionalInt(hdr(DlqHeader.seq)),
    deliveries: optionalInt(hdr(DlqHeader.deliveries)),
    consumer: hdr(DlqHeader.consumer),
    at: hdr(DlqHeader.at),
    truncated: optionalInt(hdr(DlqHeader.truncated)),
    project: letterProject(prefix, record.subject),
    notice: letterNotice(record.sourceName, msg.data),
  };
  for (const [key, value] of Object.entries(optional)) if (value !== undefined) Object.assign(record, { [key]: value });
  return record;
}

function matches(prefix: string, letter: DeadLetterRecord, filter: DlqFilter): boolean {
  if (filter.source !== undefined && !sameDlqSource(letter.source, filter.source) && !sameDlqSource(sourceTokenOf(prefix, letter.dlqSubject), filter.source))
    return false;
  if (filter.reason !== undefined && letter.reason !== filter.reason) return false;
  if (filter.untilSeq !== undefined && letter.seq > filter.untilSeq) return false;
  // The letter's project, as list and show give it (letterProject).
  if (filter.project !== undefined && letter.project !== filter.project) return false;
  if (filter.run === undefined && filter.handoff === undefined) return true;
  // Read only when asked for: the body is parsed (at most DEAD_LETTER_REFS_MAX_BYTES of it).
  const refs: DeadLetterRefs = deadLetterRefs(prefix, letter.subject, letter.data);
  if (filter.run !== undefined && refs.workflow_run_id !== filter.run && refs.mesh_run_id !== filter.run) return false;
  if (filter.handoff !== undefined && refs.handoff_id !== filter.handoff) return false;
  return true;
}
