import { EventHeader, SubjectTable, Subjects, type EventRegistry, type HandoffEvent } from '@baton/contracts';
import { decodeEvent, TRACEPARENT_HEADER, type NatsJetStream } from '@baton/eventstore';
import type { JsonLogger } from '@baton/platform';
import { followOf, type Follow, type FollowedMessage, type StreamFollower } from '../stream/stream-follower';
import { DeadlineTable } from './deadline-table';
import { applyHandoffEvent, deadlineEffectOf } from './fold';

export interface DeadlineTrackerOptions {
  js: NatsJetStream;
  /** How to follow the events stream (default: a consumer of its own on `stream`; the service passes a hub's share). */
  follow?: Follow;
  /** The events stream (`<PREFIX>_EVENTS`). */
  stream: string;
  prefix: string;
  registry: EventRegistry;
  logger: JsonLogger;
  table?: DeadlineTable;
}

/** What the tracker reports about itself (status endpoint, logs). */
export interface DeadlineTrackerStatus {
  caught_up: boolean;
  tracked: number;
  last_seq: number;
  skipped: number;
}

const decoder = new TextDecoder();

/**
 * Keeps the {@link DeadlineTable} in step with the handoff events. On start it replays every
 * `<prefix>.ev.*.handoff.*` event from its start sequence — the beginning of the events stream, or
 * the sequence after the watchdog's snapshot the table was restored from — so after a restart the
 * deadlines are rebuilt from the streams alone, then keeps following new events on the same consumer.
 *
 * Events are classified by their `Baton-Event-Type` header: most types only drop the handoff from
 * the table and are not even parsed; claims and heartbeats have their claim id and expiry picked
 * out (the full registry decode, with upcasting, is used for older versions and unknown shapes).
 * That keeps a replay of a large history cheap. An
 * event that cannot be decoded, or of a type this build does not know, is logged and skipped: it
 * never removes a lease (a lease kept by mistake costs one refused requeue; a lease lost by
 * mistake would leave the handoff claimed forever).
 */
export class DeadlineTracker {
  readonly table: DeadlineTable;
  private follower: StreamFollower | null = null;
  private skipped = 0;

  constructor(private readonly opts: DeadlineTrackerOptions) {
    this.table = opts.table ?? new DeadlineTable();
  }

  /**
   * Start following the stream (idempotent) from `startSeq` (default 1: the whole history; after a
   * restored snapshot, the sequence after it). Resolves once the consumer exists, before the replay ends.
   */
  async start(startSeq = 1): Promise<void> {
    if (this.follower) return;
    this.follower = await followOf(this.opts)({
      filterSubject: Subjects.aggregateKind(this.opts.prefix, 'handoff'),
      startSeq,
      onMessage: (message) => this.apply(message),
      onError: (error, message) => {
        this.skipped++;
        this.opts.logger.error('handoff event could not be applied to the deadline table', {
          subject: message.subject,
          seq: message.seq,
          err: error instanceof Error ? { name: error.name, message: error.message } : String(error),
        });
      },
    });
    const startedAt = Date.now();
    void this.follower.caughtUp.then(() =>
      this.opts.logger.info('deadline table rebuilt from the events stream', {
        tracked: this.table.size,
        last_seq: this.follower?.lastSeq() ?? 0,
        took_ms: Date.now() - startedAt,
      }),
    );
  }

  /** Resolves once every handoff event stored at start has been applied. */
  async caughtUp(): Promise<void> {
    if (!this.follower) throw new Error('the deadline tracker was not started');
    await this.follower.caughtUp;
  }

  status(): DeadlineTrackerStatus {
    return {
      caught_up: this.follower?.isCaughtUp() ?? false,
      tracked: this.table.size,
      last_seq: this.follower?.lastSeq() ?? 0,
      skipped: this.skipped,
    };
  }

  /** Stop following. Safe to call twice. */
  async stop(): Promise<void> {
    await this.follower?.stop();
  }

  private apply(message: FollowedMessage): void {
    const ref = this.aggregateOf(message.subject);
    if (!ref) throw new Error(`not a handoff aggregate subject: ${message.subject}`);
    const effect = deadlineEffectOf(message.header(EventHeader.type) ?? '');
    switch (effect) {
      case 'none':
        return;
      case 'clear':
        this.table.release(ref.project, ref.id);
        return;
      case 'claim':
      case 'extend': {
        const lease = this.readLease(message, effect === 'claim' ? 'handoff.claimed' : 'handoff.heartbeat');
        if (lease === 'slow') break;
        if (lease === null) return;
        if (effect === 'claim') this.table.claim(ref.id, ref.project, lease.claimId, lease.leaseExpiresAt, message.header(TRACEPARENT_HEADER));
        else this.table.extend(ref.project, ref.id, lease.leaseExpiresAt);
        return;
      }
      case 'unknown':
        break;
    }
    const event = this.decode(message);
    if (event) applyHandoffEvent(this.table, ref.project, event, message.header(TRACEPARENT_HEADER));
  }

  /**
   * The fast path for claims and heartbeats: the store validated every event against its schema
   * before appending it, so an event at the current version only needs its two fields picked out
   * (a full zod decode costs several times more, which is most of a large replay). Anything else
   * (an older version that needs upcasting, an odd shape) goes the slow path: `slow`.
   * Returns null when the message is not JSON (skipped).
   */
  private readLease(message: FollowedMessage, type: 'handoff.claimed' | 'handoff.heartbeat'): { claimId: string; leaseExpiresAt: number } | 'slow' | null {
    let raw: unknown;
    try {
      raw = JSON.parse(decoder.decode(message.data));
    } catch {
      this.skip(message, 'malformed_json', 'stored event is not JSON');
      return null;
    }
    if (typeof raw !== 'object' || raw === null) return 'slow';
    const envelope = raw as { type?: unknown; version?: unknown; payload?: { claim_id?: unknown; lease_expires_at?: unknown } };
    if (envelope.type !== type || envelope.version !== this.opts.registry.currentVersion(type)) return 'slow';
    const claimId = envelope.payload?.claim_id;
    const expiry = envelope.payload?.lease_expires_at;
    const leaseExpiresAt = typeof expiry === 'string' ? Date.parse(expiry) : NaN;
    if (typeof claimId !== 'string' || Number.isNaN(leaseExpiresAt)) return 'slow';
    return { claimId, leaseExpiresAt };
  }

  private decode(message: FollowedMessage): HandoffEvent | null {
    const decoded = decodeEvent(this.opts.registry, message.data, (name) => message.header(name));
    if (!decoded.ok) {
      this.skip(message, decoded.rejection.code, decoded.rejection.message);
      return null;
    }
    const envelope = decoded.envelope;
    if (!envelope.type.startsWith('handoff.') || deadlineEffectOf(envelope.type) === 'unknown') {
      this.skip(message, 'unknown_event_type', `not a handoff event type: ${envelope.type}`);
      return null;
    }
    // Validated against the schema of its type: by decodeEvent, or by the store that stamped it with this build's schema.
    return { type: envelope.type, data: envelope.payload } as HandoffEvent;
  }

  private skip(message: FollowedMessage, code: string, reason: string): void {
    this.skipped++;
    this.opts.logger.warn('handoff event skipped by the deadline table', { subject: message.subject, seq: message.seq, code, reason });
  }

  /** `<prefix>.ev.<project>.handoff.<id>` → project and id (the subject table); null for any other subject. */
  private aggregateOf(subject: string): { project: string; id: string } | null {
    const event = SubjectTable.event.parse(this.opts.prefix, subject);
    return event !== null && event.kind === 'handoff' ? { project: event.project, id: event.id } : null;
  }
}
