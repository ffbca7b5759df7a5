import { Subjects } from '@baton/contracts';

/** How long a stream keeps messages: forever (`limits` with no limits), or until acked (`workqueue`). */
export const Retention = { limits: 'limits', workqueue: 'workqueue', interest: 'interest' } as const;
export type Retention = (typeof Retention)[keyof typeof Retention];

export const Storage = { file: 'file', memory: 'memory' } as const;
export type Storage = (typeof Storage)[keyof typeof Storage];

/** What a stream at its limit does: drop its oldest messages, or refuse the new one. */
export const Discard = { old: 'old', new: 'new' } as const;
export type Discard = (typeof Discard)[keyof typeof Discard];

/** A stream declared as code. Fields left out take the server's default. */
export interface StreamSpec {
  name: string;
  subjects: string[];
  description?: string;
  retention: Retention;
  storage: Storage;
  /** Replica count (1 on a single server; 3 in production clusters). */
  replicas: number;
  /** Window in which a repeated `Nats-Msg-Id` is recognised as a duplicate, in ms. */
  duplicateWindowMs: number;
  /** Drop messages older than this, in ms (0 = keep forever). */
  maxAgeMs?: number;
  /** Most bytes the stream holds (0 or absent = no limit); past it, what `discard` says. */
  maxBytes?: number;
  /**
   * What a stream at a limit does with a new message: `old` (default) drops its oldest messages to
   * make room; `new` refuses the new one — its publisher gets "maximum bytes exceeded", nothing
   * acknowledged is ever dropped. A `new` stream's limit is never lowered below what it holds
   * (provision keeps the former one: JetStream would drop the oldest to fit).
   */
  discard?: Discard;
  /** Refuse message deletion / purge (history is immutable). */
  denyDelete?: boolean;
  denyPurge?: boolean;
  /** Largest message the stream accepts, in bytes. */
  maxMsgSize?: number;
  /** Most messages kept per subject (absent: no limit); the oldest of a subject go first. */
  maxMsgsPerSubject?: number;
}

export const DeliverFrom = { all: 'all', new: 'new' } as const;
export type DeliverFrom = (typeof DeliverFrom)[keyof typeof DeliverFrom];

/** A durable pull consumer declared as code (explicit ack). */
export interface ConsumerSpec {
  stream: string;
  durable: string;
  description?: string;
  /** One subject filter (multi-filter consumers need server 2.10, so Baton does not use them). */
  filterSubject?: string;
  /** Where a new consumer starts: the whole stream (`all`) or only new messages. Immutable. */
  deliverFrom?: DeliverFrom;
  /**
   * Where a consumer that has to be made now starts instead: after this stream sequence
   * (`by_start_sequence`). For a durable re-made after it was lost, from the ack floor its reader
   * knew; an existing durable is unaffected (where a consumer starts matters only at creation).
   */
  startAfterSeq?: number;
  /** How long the server waits for an ack before redelivering, in ms (default 30 s). */
  ackWaitMs?: number;
  /**
   * Server-side delivery cap. Baton leaves it unlimited (-1): the runner dead-letters a message at
   * its own `maxDeliver` so nothing is silently dropped by the server.
   */
  maxDeliver?: number;
  /** Most unacknowledged messages outstanding at once (default 1000). */
  maxAckPending?: number;
  /**
   * The server deletes the durable once nobody has pulled from it or acknowledged for this long, in
   * ms (nats-server 2.9 honours it on durables; absent: kept until deleted).
   */
  inactiveThresholdMs?: number;
}

export type TopologySpec = { streams: StreamSpec[]; consumers: ConsumerSpec[] };

/** Names of Baton's streams for a subject prefix. */
export interface BatonStreamNames {
  events: string;
  inbox: string;
  dlq: string;
}

/**
 * Turn a subject prefix into the stem of stream names: uppercase, with anything other than
 * letters, digits, `_` and `-` replaced by `_` (stream names may not hold `.`, `*`, `>` or spaces).
 */
export function streamStem(prefix: string): string {
  const stem = prefix.toUpperCase().replace(/[^A-Z0-9_-]/g, '_');
  if (stem.length === 0) throw new Error('subject prefix must not be empty');
  return stem;
}

/**
 * The subjects `<PREFIX>_INBOX` stores: exactly the inputs some consumer reads (run starts, agent
 * results, customer messages, operator answers, stop requests, offers, mesh starts / turns /
 * answers). A message on any other `<prefix>.in.…` subject (`<prefix>.in.<p>.bogus`) is refused by
 * the server — a JetStream publish gets "no stream" — instead of being kept unread for 30 days.
 */
export function inboxSubjects(prefix: string): string[] {
  const any = '*';
  return [
    Subjects.runStart(prefix, any),
    Subjects.agentRunStarts(prefix),
    Subjects.agentResults(prefix),
    Subjects.sessionMessages(prefix),
    Subjects.agentSessionMessages(prefix),
    Subjects.operatorAnswers(prefix),
    Subjects.stopRequest(prefix, any),
    Subjects.offer(prefix, any, any),
    Subjects.meshStarts(prefix),
    Subjects.agentMeshStarts(prefix),
    Subjects.meshResults(prefix),
    Subjects.meshAnswers(prefix),
  ];
}

/** `<PREFIX>_EVENTS`, `<PREFIX>_INBOX` and `<PREFIX>_DLQ` for a subject prefix. */
export function batonStreamNames(prefix: string): BatonStreamNames {
  const stem = streamStem(prefix);
  return { events: `${stem}_EVENTS`, inbox: `${stem}_INBOX`, dlq: `${stem}_DLQ` };
}

export interface BatonTopologyOptions {
  /** Replicas for every stream (default 1; production clusters use 3). */
  replicas?: number;
  storage?: Storage;
  /** How long raw inbox input (agent results, operator answers) is kept, in ms (default 30 days). */
  inboxMaxAgeMs?: number;
  /**
   * Most bytes of inbox input kept (0 or absent = no limit). Full, the inbox refuses new messages
   * (discard new: "maximum bytes exceeded" to their publishers) and drops none it acknowledged.
   */
  inboxMaxBytes?: number;
  /** How long dead letters are kept, in ms (default {@link DLQ_DEFAULTS}.maxAgeMs, 30 days; 0 = forever). */
  dlqMaxAgeMs?: number;
  /** Most bytes of dead letters kept (default {@link DLQ_DEFAULTS}.maxBytes, 1 GiB; 0 = no limit). The oldest go first. */
  dlqMaxBytes?: number;
  /**
   * Window in which a message dead-lettered again (same source stream and sequence, or the same
   * core request) is stored once, in ms (default 1 hour; never longer than `dlqMaxAgeMs`).
   */
  dlqDuplicateWindowMs?: number;
}

const TWO_MINUTES = 2 * 60 * 1000;
const HOUR = 60 * 60 * 1000;
const DAY = 24 * HOUR;

/** Limits of the dead-letter stream when the options name none. */
export const DLQ_DEFAULTS = { maxAgeMs: 30 * DAY, maxBytes: 1024 * 1024 * 1024, duplicateWindowMs: HOUR } as const;

/**
 * Baton's streams for a subject prefix:
 * - `<PREFIX>_EVENTS` binds `<prefix>.ev.>`: the event store, one subject per aggregate; limits
 *   retention, nothing expires, message delete and purge are denied, 2-minute duplicate window.
 * - `<PREFIX>_INBOX` binds the inbox subjects some consumer reads ({@link inboxSubjects}): agent
 *   results, starts, messages, operator answers, stop requests, offers, mesh inputs, kept (limits
 *   retention, several services may read the same input) for `inboxMaxAgeMs`, and at most
 *   `inboxMaxBytes` (no limit by default): discard new — a full inbox refuses what comes, never
 *   drops what it acknowledged and no consumer may have read yet.
 * - `<PREFIX>_DLQ` binds `<prefix>.dlq.>`: dead letters with their original bytes, kept for
 *   `dlqMaxAgeMs` (30 days) and at most `dlqMaxBytes` (1 GiB), the oldest dropped first (discard
 *   old); a message dead-lettered twice within `dlqDuplicateWindowMs` (1 hour) is stored once.
 * Consumers are declared by the services that own them.
 */
export function batonTopology(prefix: string, opts: BatonTopologyOptions = {}): TopologySpec {
  const names = batonStreamNames(prefix);
  const replicas = opts.replicas ?? 1;
  const storage = opts.storage ?? Storage.file;
  const dlqMaxAgeMs = opts.dlqMaxAgeMs ?? DLQ_DEFAULTS.maxAgeMs;
  const dlqWindow = opts.dlqDuplicateWindowMs ?? DLQ_DEFAULTS.duplicateWindowMs;
  return {
    streams: [
      {
        name: names.events,
        subjects: [Subjects.events(prefix)],
        description: 'Baton event store: one subject per aggregate instance',
        retention: Retention.limits,
        storage,
        replicas,
        duplicateWindowMs: TWO_MINUTES,
        denyDelete: true,
        denyPurge: true,
      },
      {
        name: names.inbox,
        subjects: inboxSubjects(prefix),
        description: 'Baton inbox: agent results and operator answers',
        retention: Retention.limits,
        storage,
        replicas,
        duplicateWindowMs: TWO_MINUTES,
        maxAgeMs: opts.inboxMaxAgeMs ?? 30 * DAY,
        ...(opts.inboxMaxBytes !== undefined && opts.inboxMaxBytes > 0 ? { maxBytes: opts.inboxMaxBytes } : {}),
        discard: Discard.new,
      },
      {
        name: names.dlq,
        subjects: [Subjects.deadLetters(prefix)],
        description: 'Baton dead letters: original bytes plus reason headers',
        retention: Retention.limits,
        storage,
        replicas,
        // The server refuses a duplicate window longer than the age limit.
        duplicateWindowMs: dlqMaxAgeMs > 0 ? Math.min(dlqWindow, dlqMaxAgeMs) : dlqWindow,
        maxAgeMs: dlqMaxAgeMs,
        maxBytes: opts.dlqMaxBytes ?? DLQ_DEFAULTS.maxBytes,
      },
    ],
    consumers: [],
  };
}

/**
 * The watchdog's snapshot stream, `<PREFIX>_WATCHDOG` on `<prefix>.wd.>`: the watchdog's folded
 * state saved now and then, so a restart reads the events stream from the snapshot's sequence
 * instead of from the start (apps/watchdog/src/snapshot). Made by the watchdog on its first save.
 */
export function watchdogSnapshotStream(prefix: string): { name: string; subjects: string[] } {
  return { name: `${streamStem(prefix)}_WATCHDOG`, subjects: [`${prefix}.wd.>`] };
}

/**
 * The operator API token revocation log, `<PREFIX>_TOKEN_REVOCATIONS` on `<prefix>.auth.revoked.<token_id>`:
 * signed revocations only the admin appends and the notifier reads (libs/platform/src/auth/token-revocations.ts).
 * Made by the notifier at start when it holds the token key.
 */
export function tokenRevocationStream(prefix: string): { name: string; subjects: string[] } {
  return { name: `${streamStem(prefix)}_TOKEN_REVOCATIONS`, subjects: [`${prefix}.auth.revoked.*`] };
}

/**
 * Every stream a deployment of `prefix` may hold: the three of {@link batonStreamNames}, the
 * watchdog's snapshots and the token revocation log.
 */
export function deploymentStreamNames(prefix: string): string[] {
  const names = batonStreamNames(prefix);
  return [names.events, names.inbox, names.dlq, watchdogSnapshotStream(prefix).name, tokenRevocationStream(prefix).name];
}
