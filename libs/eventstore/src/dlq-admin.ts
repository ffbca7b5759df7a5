import {
  AckPolicy,
  DeliverPolicy,
  headers as natsHeaders,
  nanos,
  nuid,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from 'nats';
import { DlqHeader } from './dead-letter';
import { EventStoreError, StreamNotFound, mapPublishError } from './errors';
import { batonStreamNames } from './topology';

/**
 * Administration of the dead-letter stream `<PREFIX>_DLQ`: list, show and redrive.
 *
 * Redrive record: when a dead letter is redriven, a marker message is appended to the DLQ stream
 * itself on `<prefix>.dlq.redriven` (empty body, header `Baton-Dlq-Redriven-Seq: <seq>`,
 * `Nats-Msg-Id` `redriven:<stream>:<seq>`). No other store (no Redis) is involved: whoever can read
 * the DLQ knows what was redriven. Markers are never listed as dead letters.
 */

/** Headers of the redrive marker and of a redriven message. */
export const DlqRedriveHeader = {
  /** On a marker: the DLQ sequence that was redriven. */
  redrivenSeq: 'Baton-Dlq-Redriven-Seq',
  /** On a marker: when. */
  redrivenAt: 'Baton-Dlq-Redriven-At',
  /** On the republished message: `<DLQ stream>:<seq>` it came from. */
  redrivenFrom: 'Baton-Redriven-From',
  /** On the republished message: the original `Nats-Msg-Id`, kept for tracing. */
  originalMsgId: 'Baton-Original-Msg-Id',
} as const;

/** Source token of the redrive markers (`<prefix>.dlq.redriven`). */
export const REDRIVE_MARKER_SOURCE = 'redriven';

/** One dead letter as stored in `<PREFIX>_DLQ`. */
export interface DeadLetterRecord {
  /** Sequence in the DLQ stream (the id `baton dlq show` takes). */
  seq: number;
  /** DLQ subject, `<prefix>.dlq.<source>`. */
  dlqSubject: string;
  reason: string;
  detail?: string;
  /** Which consumer gave up. */
  source: string;
  /** Where the original was published (the redrive target). */
  subject: string;
  /** Stream and sequence of the original. */
  originalStream?: string;
  originalSeq?: number;
  deliveries?: number;
  consumer?: string;
  /** When it was dead-lettered (ISO). */
  at?: string;
  /** The original headers, to restore on redrive (empty when they did not decode). */
  headers: Record<string, string[]>;
  /** The original bytes. */
  data: Uint8Array;
  /** True when a redrive marker names this sequence. */
  redriven: boolean;
}

export interface DlqFilter {
  /** Only dead letters of this source (the `Baton-Dlq-Source` header or the subject token). */
  source?: string;
  /** Only dead letters with this reason code. */
  reason?: string;
  /** Only sequences up to and including this one. */
  untilSeq?: number;
}

export interface DlqAdminOptions {
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** Subject prefix, e.g. `baton`. */
  prefix: string;
}

/** What one redrive did to one dead letter. */
export interface RedriveItem {
  seq: number;
  subject: string;
  /** `republished`: sent now; `duplicate`: the target stream had it already (same redrive msg id); `skipped`: marked redriven before; `planned`: dry run. */
  status: 'republished' | 'duplicate' | 'skipped' | 'planned';
  /** Sequence in the target stream (absent on skipped / planned). */
  targetSeq?: number;
}

export interface RedriveReport {
  items: RedriveItem[];
  republished: number;
  skipped: number;
  duplicates: number;
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
 * Read, inspect and redrive Baton's dead letters. Every method reads the DLQ stream afresh (an
 * ephemeral, unacknowledged, in-memory consumer that is deleted afterwards); nothing is cached.
 */
export class DlqAdmin {
  private readonly js: JetStreamClient;
  private readonly jsm: JetStreamManager;
  private readonly prefix: string;
  /** The DLQ stream's name, `<PREFIX>_DLQ`. */
  readonly stream: string;

  constructor(opts: DlqAdminOptions) {
    this.js = opts.js;
    this.jsm = opts.jsm;
    this.prefix = opts.prefix;
    this.stream = batonStreamNames(opts.prefix).dlq;
  }

  /**
   * Every dead letter matching `filter`, oldest first, with `redriven` set from the markers.
   * Throws StreamNotFound when the DLQ stream does not exist.
   */
  async list(filter: DlqFilter = {}): Promise<DeadLetterRecord[]> {
    const { letters, redriven } = await this.scan();
    return letters
      .map((letter) => ({ ...letter, redriven: redriven.has(letter.seq) }))
      .filter((letter) => matches(letter, filter));
  }

  /** The dead letter at DLQ sequence `seq`, or null when there is none (or it is a redrive marker). */
  async show(seq: number): Promise<DeadLetterRecord | null> {
    const letters = await this.list();
    return letters.find((letter) => letter.seq === seq) ?? null;
  }

  /**
   * Republish each matching dead letter that is not marked redriven to its original subject, with
   * its original headers (minus `Nats-Msg-Id` / `Nats-Expected-*`, which were directives of the
   * first publish) plus `Baton-Redriven-From`, and `Nats-Msg-Id` = {@link redriveMsgId}; then
   * append the redrive marker. Idempotent: a second run skips marked letters, and if a run died
   * between the republish and the marker, the repeat is recognised as a duplicate by the target
   * stream inside its duplicate window (and by the consumer's own idempotency after it). Letters
   * whose original subject is not covered by a stream fail the redrive with the publish error;
   * letters before it stay redriven. `dryRun` lists what would be republished and changes nothing.
   */
  async redrive(filter: DlqFilter = {}, opts: { dryRun?: boolean } = {}): Promise<RedriveReport> {
    const letters = await this.list(filter);
    const report: RedriveReport = { items: [], republished: 0, skipped: 0, duplicates: 0 };
    for (const letter of letters) {
      if (letter.redriven) {
        report.items.push({ seq: letter.seq, subject: letter.subject, status: 'skipped' });
        report.skipped++;
        continue;
      }
      if (opts.dryRun) {
        report.items.push({ seq: letter.seq, subject: letter.subject, status: 'planned' });
        continue;
      }
      const hdrs = natsHeaders();
      let originalMsgId: string | undefined;
      for (const [key, values] of Object.entries(letter.headers)) {
        if (/^nats-msg-id$/i.test(key)) originalMsgId = values[0];
        if (DROPPED_HEADERS.test(key)) continue;
        for (const value of values) hdrs.append(key, value);
      }
      hdrs.set(DlqRedriveHeader.redrivenFrom, `${this.stream}:${letter.seq}`);
      if (originalMsgId !== undefined) hdrs.set(DlqRedriveHeader.originalMsgId, originalMsgId);
      let ack;
      try {
        ack = await this.js.publish(letter.subject, letter.data, { msgID: redriveMsgId(this.stream, letter.seq), headers: hdrs });
      } catch (err) {
        throw mapPublishError(err, letter.subject, undefined);
      }
      await this.mark(letter.seq);
      report.items.push({ seq: letter.seq, subject: letter.subject, status: ack.duplicate ? 'duplicate' : 'republished', targetSeq: ack.seq });
      if (ack.duplicate) report.duplicates++;
      else report.republished++;
    }
    return report;
  }

  private async mark(seq: number): Promise<void> {
    const subject = `${this.prefix}.dlq.${REDRIVE_MARKER_SOURCE}`;
    const hdrs = natsHeaders();
    hdrs.set(DlqRedriveHeader.redrivenSeq, String(seq));
    hdrs.set(DlqRedriveHeader.redrivenAt, new Date().toISOString());
    try {
      await this.js.publish(subject, new Uint8Array(0), { msgID: `redriven:${this.stream}:${seq}`, headers: hdrs });
    } catch (err) {
      throw mapPublishError(err, subject, undefined);
    }
  }

  /** Read the whole DLQ stream: dead letters and the set of sequences marked redriven. */
  private async scan(): Promise<{ letters: DeadLetterRecord[]; redriven: Set<number> }> {
    const name = `dlq_${nuid.next()}`;
    const letters: DeadLetterRecord[] = [];
    const redriven = new Set<number>();
    const marker = `${this.prefix}.dlq.${REDRIVE_MARKER_SOURCE}`;
    let created = false;
    try {
      const info = await this.jsm.consumers
        .add(this.stream, {
          name,
          deliver_policy: DeliverPolicy.All,
          ack_policy: AckPolicy.None,
          max_deliver: 1,
          mem_storage: true,
          num_replicas: 1,
          inactive_threshold: nanos(30_000),
        })
        .catch((err: unknown) => {
          const text = String((err as Error).message ?? err);
          if (/stream not found/i.test(text)) throw new StreamNotFound(this.stream, { cause: err });
          throw new EventStoreError(`cannot open a reader on ${this.stream}: ${text}`, { cause: err });
        });
      created = true;
      const consumer = await this.js.consumers.get(this.stream, name);
      let remaining = info.num_pending;
      while (remaining > 0) {
        const batch = await consumer.fetch({ max_messages: Math.min(remaining, 256), expires: 5000 });
        let got = 0;
        for await (const msg of batch) {
          got++;
          remaining--;
          if (msg.subject === marker) {
            const seq = optionalInt(msg.headers?.get(DlqRedriveHeader.redrivenSeq));
            if (seq !== undefined) redriven.add(seq);
          } else {
            letters.push(decodeLetter(msg));
          }
        }
        if (got === 0) throw new EventStoreError(`reading ${this.stream} stalled with ${remaining} messages still pending`);
      }
    } finally {
      if (created) await this.jsm.consumers.delete(this.stream, name).catch(() => undefined);
    }
    return { letters, redriven };
  }
}

function decodeLetter(msg: JsMsg): DeadLetterRecord {
  const hdr = (name: string): string | undefined => {
    const value = msg.headers?.get(name);
    return value === undefined || value === '' ? undefined : value;
  };
  const token = msg.subject.split('.').pop() ?? '';
  const record: DeadLetterRecord = {
    seq: msg.seq,
    dlqSubject: msg.subject,
    reason: hdr(DlqHeader.reason) ?? 'unknown',
    source: hdr(DlqHeader.source) ?? token,
    subject: hdr(DlqHeader.subject) ?? '',
    headers: parseHeaderRecord(hdr(DlqHeader.headers)),
    data: msg.data,
    redriven: false,
  };
  const optional: Partial<DeadLetterRecord> = {
    detail: hdr(DlqHeader.detail),
    originalStream: hdr(DlqHeader.stream),
    originalSeq: optionalInt(hdr(DlqHeader.seq)),
    deliveries: optionalInt(hdr(DlqHeader.deliveries)),
    consumer: hdr(DlqHeader.consumer),
    at: hdr(DlqHeader.at),
  };
  for (const [key, value] of Object.entries(optional)) if (value !== undefined) Object.assign(record, { [key]: value });
  return record;
}

function matches(letter: DeadLetterRecord, filter: DlqFilter): boolean {
  if (filter.source !== undefined && letter.source !== filter.source && letter.dlqSubject.split('.').pop() !== filter.source) return false;
  if (filter.reason !== undefined && letter.reason !== filter.reason) return false;
  if (filter.untilSeq !== undefined && letter.seq > filter.untilSeq) return false;
  return true;
}

