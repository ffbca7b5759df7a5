import { EventHeader, SubjectTable, Subjects, type EventRegistry, type HandoffEventData } from '@baton/contracts';
import { decodeEvent, TRACEPARENT_HEADER, type NatsJetStream } from '@baton/eventstore';
import type { JsonLogger } from '@baton/platform';
import type { RequeueCall, RequeueLedger, RequeueReply } from '../requeue/requeue-port';
import { followOf, type Follow, type FollowedMessage, type StreamFollower } from '../stream/stream-follower';
import { DeadlineTable, keyOf, type SavedDeadline } from './deadline-table';

/** The pseudo claim id under which a handoff's deadline sits in its {@link DeadlineTable}. */
export const DEADLINE_SLOT = 'deadline';

/** Events after which a handoff's deadline no longer applies (it ended, or came back). */
const CLEARS = new Set([
  'handoff.returned',
  'handoff.completed',
  'handoff.completed_by_result',
  'handoff.released',
  'handoff.abandoned',
  'handoff.failed',
  'handoff.escalated',
  'handoff.deadline_expired',
  'handoff.archived',
]);

/** What {@link HandoffDeadlineTracker.save} gives: `[key, project, deadline ms]` per open handoff with a deadline, and the table. */
export interface SavedHandoffDeadlines {
  known: Array<[string, string, number]>;
  table: SavedDeadline[];
}

/**
 * Keeps a {@link DeadlineTable} of the handoffs that have a `deadline_at` and are still open
 * (pending or claimed; a reworked handoff is open again). Rebuilt at start from the watchdog's
 * snapshot and the events after it (or the whole stream), like the lease table. The watchdog's second `RequeueLoop` walks
 * this table and sends `expire_deadline` (see {@link expireDeadlineLedger}).
 */
export class HandoffDeadlineTracker {
  readonly table = new DeadlineTable();
  private readonly deadlines = new Map<string, { project: string; at: number }>();
  private follower: StreamFollower | null = null;

  constructor(private readonly opts: { js: NatsJetStream; stream: string; follow?: Follow; prefix: string; registry: EventRegistry; logger: JsonLogger }) {}

  /** Start following the stream, from `startSeq` (default 1: the whole history; after a restored snapshot, the sequence after it). */
  async start(startSeq = 1): Promise<void> {
    if (this.follower) return;
    this.follower = await followOf(this.opts)({
      filterSubject: Subjects.aggregateKind(this.opts.prefix, 'handoff'),
      startSeq,
      onMessage: (message) => this.apply(message),
      onError: (error, message) =>
        this.opts.logger.error('handoff event could not be applied to the deadlines', { subject: message.subject, seq: message.seq, err: String(error) }),
    });
  }

  async caughtUp(): Promise<void> {
    await this.follower?.caughtUp;
  }

  /** What the tracker holds: the deadlines of open handoffs, and the table of those not returned (the watchdog's snapshot). */
  save(): SavedHandoffDeadlines {
    return { known: [...this.deadlines].map(([key, { project, at }]) => [key, project, at]), table: this.table.save() };
  }

  /** Replace what the tracker holds with a saved state (before it starts). */
  restore(saved: SavedHandoffDeadlines): void {
    this.deadlines.clear();
    for (const [key, project, at] of saved.known) this.deadlines.set(key, { project, at });
    this.table.restore(saved.table);
  }

  async stop(): Promise<void> {
    await this.follower?.stop();
  }

  private apply(message: FollowedMessage): void {
    const type = message.header(EventHeader.type) ?? '';
    const aggregate = SubjectTable.event.parse(this.opts.prefix, message.subject);
    if (aggregate === null || aggregate.kind !== 'handoff') return;
    const { project, id } = aggregate;
    const key = keyOf(project, id);
    if (type === 'handoff.created') {
      const decoded = decodeEvent(this.opts.registry, message.data, (name) => message.header(name));
      if (!decoded.ok) throw new Error(decoded.rejection.message);
      const deadline = (decoded.envelope.payload as HandoffEventData<'handoff.created'>).deadline_at;
      if (deadline === undefined) return;
      const at = Date.parse(deadline);
      this.deadlines.set(key, { project, at });
      this.table.claim(id, project, DEADLINE_SLOT, at, message.header(TRACEPARENT_HEADER));
      return;
    }
    if (type === 'handoff.reworked') {
      const known = this.deadlines.get(key);
      if (known) this.table.claim(id, project, DEADLINE_SLOT, known.at, message.header(TRACEPARENT_HEADER));
      return;
    }
    if (CLEARS.has(type)) {
      this.table.release(project, id);
      if (type !== 'handoff.returned') this.deadlines.delete(key);
    }
  }
}

/**
 * Adapts the lease requeue loop to deadlines: the loop's `requeueExpired` becomes the ledger's
 * `expire_deadline` with the idempotency key `deadline:<handoff id>` (the same for every watchdog
 * instance and retry, so the handoff expires once). `send` is `LedgerClient.send`.
 */
export function expireDeadlineLedger(
  send: (project: string, command: 'expire_deadline', body: object, call?: RequeueCall) => Promise<RequeueReply>,
): RequeueLedger {
  return {
    requeueExpired: (project, command, call) =>
      send(project, 'expire_deadline', { handoff_id: command.handoff_id, idempotency_key: `deadline:${command.handoff_id}` }, call),
  };
}
