import { Inject, Injectable } from '@nestjs/common';
import { ROUTER_DLQ_SOURCES } from '@baton/eventstore';
import { INBOX_REFUSED_LETTERS, inboxSenderOf, RUNTIME, type RefusedLetters, type ServiceRuntime } from '@baton/platform';

/** Where an inbox message the router refuses came from: its subject, the stream and sequence that store it, and the consumer's dead-letter source. */
export interface InboundOrigin {
  subject: string;
  stream: string;
  seq: number;
  /** The readable dead-letter source of the consumer that read it (`router-messages`…): its budget and summary are that source's. */
  source: string;
}

/** The origin of the message a router inbox consumer of `pattern` (as written in its decorator) is handling. */
export function inboundOrigin(message: { subject: string; stream: string; seq: number }, pattern: string): InboundOrigin {
  const source = ROUTER_DLQ_SOURCES[pattern];
  if (source === undefined) throw new Error(`no dead-letter source is declared for the router's pattern ${pattern} (ROUTER_DLQ_SOURCES)`);
  return { subject: message.subject, stream: message.stream, seq: message.seq, source };
}

/** What became of a refusal the router records on its run or mesh: recorded (with what recording returned), or only counted. */
export type BudgetedRefusal<T> = { outcome: 'recorded'; value: T } | { outcome: 'suppressed' };

/**
 * The sender's budget of the refusals the router records on a run or a mesh (`run.result_rejected`
 * of a result or a customer message, `mesh.turn_rejected` of a turn): each is an event appended to
 * the shared events stream, and an agent (or the customer channel) can have one refused at will —
 * under a new id every time, on any run or mesh of its project. So they go through the same
 * per-sender budget as refused letters — the very same budget: the service's one
 * `RefusedLetters` for agents' inbox messages (`INBOX_REFUSED_LETTERS`, built by `runService`, whose
 * consumers' letter gate writes the letters of the messages they refuse for themselves through it),
 * `BATON_REFUSED_LETTERS_PER_MINUTE` a minute per router instance, consumer source and sender (the
 * inbox subject's `<project>/<agent>`, the project on a shared subject — never the body). A sender
 * has one budget per source, whether its messages are refused into letters or on their run or mesh;
 * before, each path had its own, so a sender had twice the budget. Within it the refusal is recorded
 * on its aggregate as before; past it, it is not, and the sender's window ends in one
 * `refusals_suppressed` letter of the consumer's source naming the inbox sequences of the rest (its
 * `on_run_or_mesh` says how many of them were refused on their run or mesh: acknowledged, not
 * dead-lettered). Refusals of what no agent publishes (operators' answers) are always recorded. One
 * instance for the router (the meshes module provides and exports it); the open windows are summed
 * up by `runService` when the router stops, after its app closed.
 */
@Injectable()
export class RefusalBudget {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(INBOX_REFUSED_LETTERS) private readonly letters: RefusedLetters,
  ) {}

  /**
   * Record the refusal (`reason`, its code) of the message of `origin` by `record` while its
   * sender's budget lasts; past it, count it for the sender's summary instead. Without an origin,
   * or for a subject no agent publishes, `record` is always called.
   */
  async record<T>(origin: InboundOrigin | undefined, reason: string, record: () => Promise<T>): Promise<BudgetedRefusal<T>> {
    const sender = origin === undefined ? null : inboxSenderOf(this.runtime.config.BATON_PREFIX, origin.subject);
    if (origin === undefined || sender === null) return { outcome: 'recorded', value: await record() };
    return this.letters.record(sender, { ...origin, reason }, record);
  }
}
