import { SubjectTable, type AggregateKind, type EventRegistry } from '@baton/contracts';
import type { JetStreamClient } from 'nats';
import { deadLetter } from './dead-letter';
import { decodeEvent, decodeParsedEvent, headerOf } from './decode';
import { PoisonError } from './errors';
import { hopTrace, type HopTrace } from './trace-context';
import type { AggregateRef, CachedNextEvent, DomainEventLike, EventStore, FoldLike, StoredEvent } from './store';

/*
 * Reactors as handler tables. A reactor names the aggregate it follows, the fold of that
 * aggregate (its decider) and a handler per event type:
 *
 *   reactor({ aggregate: 'run', decider: routerRunDecider, on: { 'run.routed': (event, state, ctx) => … } })
 *
 * A handler gets the event typed and the aggregate's state just before and just after it, served
 * by the event store's one fold cache (`eventStates`: what the writer in this process just folded,
 * or the events after the cached fold, read once). Everything else happens once, in the edge that
 * calls the table ({@link reactorEdge}, run by the Nest transport's `ctx.react(table)`): the
 * subject is parsed with the subject table (`SubjectTable.event`:
 * `<prefix>.ev.<project>.<kind>.<id>`), the bytes decoded through the registry, the envelope
 * checked against the subject (an event whose project, kind or id disagrees with the subject it
 * was stored on is refused), and what can never be handled is a PoisonError, which the
 * consumer runner dead-letters; resolving acknowledges. A handler never sees bytes or a client
 * message.
 */

/** An event as a reactor handler gets it: the stored envelope (payload typed) and its stream sequence. */
export type ReactorEvent<E extends DomainEventLike> = E extends DomainEventLike ? Omit<StoredEvent<E['data']>, 'type'> & { type: E['type'] } : never;

/** The aggregate's state around the handled event. */
export interface ReactorStates<S> {
  /** As of the sequence before the event (everything the aggregate had before it). */
  before: S;
  /** As of the event (`before` with the event folded on). */
  after: S;
}

/** What a dead letter raised by a handler records besides the event's own bytes, subject, stream and sequence. */
export interface ReactorDeadLetter {
  /** Dead-letter source token (`<prefix>.dlq.<source>`). */
  source: string;
  reason: string;
  detail: string;
  /** Default: the durable the event was delivered through. */
  consumer?: string;
  /** Default: the delivery count. */
  deliveries?: number;
  /** Which letter about this event, when the handler may write several (see `DeadLetterInput.part`). */
  part?: string;
}

/** Where the handled event came from, and what a handler may do besides its own effects. */
export interface ReactorContext {
  /** The aggregate (from the subject; the envelope agrees with it). */
  readonly ref: AggregateRef;
  readonly subject: string;
  /** Stream sequence of the event. */
  readonly seq: number;
  /** 1 on first delivery. */
  readonly deliveryCount: number;
  /**
   * This hop's trace (the event's `traceparent`, a span id of its own): pass it on to what the
   * handler appends (`CommandMeta.trace`) and asks of the ledger (`LedgerCallOptions.trace`).
   */
  readonly trace: HopTrace;
  /** True when the aggregate has events after this one (the event is old history being replayed). */
  superseded(): Promise<boolean>;
  /**
   * The aggregate's next event after this one when the store's fold cache keeps it (the two were
   * appended by one command of this process, say), else null. Never reads: null says nothing about
   * the stream. The next event is still delivered and handled on its own.
   */
  next(): CachedNextEvent | null;
  /**
   * Record the event as a dead letter (its stored bytes and headers) with a reason of the
   * handler's own, e.g. a follow-up command that was refused; the event itself is still
   * acknowledged when the handler resolves. Idempotent per event and source.
   */
  deadLetter(letter: ReactorDeadLetter): Promise<void>;
}

/** Handles one event type. Resolving acknowledges; a TransientError retries with backoff; a PoisonError dead-letters. */
export type ReactorHandler<E extends DomainEventLike, S> = (event: ReactorEvent<E>, state: ReactorStates<S>, ctx: ReactorContext) => Promise<void> | void;

/** One handler per event type the reactor reacts to; other types are acknowledged untouched. */
export type ReactorHandlers<E extends DomainEventLike, S> = { [T in E['type']]?: ReactorHandler<Extract<E, { type: T }>, S> };

export interface ReactorDefinition<E extends DomainEventLike, S> {
  /** The aggregate kind whose events the reactor follows. */
  aggregate: AggregateKind;
  /** The aggregate's fold: `evolve` and `initialState` (the decider its writer uses, so the fold cache is shared). */
  decider: FoldLike<E, S>;
  on: ReactorHandlers<E, S>;
  /** Name in error messages (default `<aggregate> reactor`). */
  name?: string;
}

/** A reactor table, ready for an edge. */
export interface Reactor<E extends DomainEventLike = DomainEventLike, S = unknown> {
  readonly name: string;
  readonly aggregate: AggregateKind;
  readonly decider: FoldLike<E, S>;
  /** The handler of `type`, or undefined when the reactor does not react to it. */
  handlerOf(type: string): ReactorHandler<E, S> | undefined;
}

/** Build a reactor table (see the module comment). */
export function reactor<E extends DomainEventLike, S>(definition: ReactorDefinition<E, S>): Reactor<E, S> {
  const handlers = definition.on as Record<string, ReactorHandler<E, S> | undefined>;
  return {
    name: definition.name ?? `${definition.aggregate} reactor`,
    aggregate: definition.aggregate,
    decider: definition.decider,
    handlerOf: (type) => (Object.prototype.hasOwnProperty.call(handlers, type) ? handlers[type] : undefined),
  };
}

/** A delivered message as the edge needs it (a `ConsumedMessage` of the runner has all of it). */
export interface DeliveredMessage {
  subject: string;
  data: Uint8Array;
  headers: Record<string, string[]>;
  seq: number;
  deliveryCount: number;
  stream: string;
  consumer: string;
}

export interface ReactorEdgeOptions {
  /** Subject prefix (`baton`). */
  prefix: string;
  registry: EventRegistry;
  store: Pick<EventStore, 'eventStates' | 'hasEventsAfter' | 'observe' | 'cachedNext'>;
  /** For the dead letters handlers raise through `ctx.deadLetter`. */
  js: JetStreamClient;
}

/** The header the server stores with an appended event: the subject's last sequence the append expected. */
const EXPECTED_LAST_SUBJECT_SEQ = 'Nats-Expected-Last-Subject-Sequence';

/** Runs reactor tables on delivered messages (see {@link reactorEdge}). */
export interface ReactorEdge {
  /**
   * Handle one delivered message with `table`. `body` is the message already parsed as JSON
   * (the transport parses every body; passing it spares a second parse); `trace`, the hop trace
   * the caller already made for it (default: one from the message's headers). Throws a
   * {@link PoisonError} for a message that can never be handled: not an event subject
   * (`identity_mismatch`), bytes that do not decode (the registry's code, or `malformed_json`),
   * an envelope that disagrees with its subject (`identity_mismatch`). An event of another
   * aggregate kind, or of a type the table has no handler for, resolves untouched. Whatever the
   * handler or the state read throws is thrown as it is.
   */
  deliver<E extends DomainEventLike, S>(table: Reactor<E, S>, message: DeliveredMessage, parsed?: { body: unknown; trace?: HopTrace }): Promise<void>;
}

/**
 * The edge that calls reactor tables: subject parsing, decoding, the identity check, the state
 * around the event from the store's fold cache, the handler's dead letters. Acknowledgement,
 * retries and dead letters for what it throws are the consumer runner's (the Nest transport runs
 * one per `@EventPattern`).
 */
export function reactorEdge(options: ReactorEdgeOptions): ReactorEdge {
  const { prefix, registry, store, js } = options;
  return {
    async deliver(table, message, parsed) {
      const where = `${table.name}: ${message.subject}#${message.seq}`;
      const address = SubjectTable.event.parse(prefix, message.subject);
      if (address === null) throw new PoisonError(`${where}: not an event subject (<prefix>.ev.<project>.<kind>.<id>)`, 'identity_mismatch');
      const header = headerOf(message.headers);
      const decoded = parsed ? decodeParsedEvent(registry, parsed.body, header) : decodeEvent(registry, message.data, header);
      if (!decoded.ok) throw new PoisonError(`${where}: event cannot be decoded: ${decoded.rejection.message}`, decoded.rejection.code);
      const envelope = decoded.envelope;
      if (envelope.project !== address.project || envelope.aggregate.kind !== address.kind || envelope.aggregate.id !== address.id) {
        throw new PoisonError(
          `${where}: event ${envelope.id} names ${envelope.project}/${envelope.aggregate.kind}/${envelope.aggregate.id} but was stored on ${address.project}/${address.kind}/${address.id}`,
          'identity_mismatch',
        );
      }
      if (address.kind !== table.aggregate) return;
      const fold = (table as Reactor<DomainEventLike, unknown>).decider;
      const ref: AggregateRef = { project: envelope.project, kind: envelope.aggregate.kind, id: envelope.aggregate.id };
      // Every event of the followed aggregate, handled or not, keeps the fold cache up with the
      // stream when it follows the cached fold directly (the store's append stamped the sequence
      // it expected): a later read of the aggregate in this process then needs no events.
      const event: StoredEvent = Object.assign({}, envelope, { seq: message.seq });
      const previous = header(EXPECTED_LAST_SUBJECT_SEQ);
      if (previous !== undefined && /^\d{1,15}$/.test(previous)) store.observe(ref, fold, event, Number(previous));
      const handler = (table as Reactor<DomainEventLike, unknown>).handlerOf(envelope.type);
      if (handler === undefined) return;
      const states = await store.eventStates(ref, fold, message.seq);
      const ctx: ReactorContext = {
        ref,
        subject: message.subject,
        seq: message.seq,
        deliveryCount: message.deliveryCount,
        trace: parsed?.trace ?? hopTrace(message.headers),
        superseded: () => store.hasEventsAfter(ref, message.seq),
        next: () => store.cachedNext(ref, message.seq),
        async deadLetter(letter) {
          await deadLetter(js, {
            prefix,
            source: letter.source,
            reason: letter.reason,
            detail: letter.detail,
            subject: message.subject,
            headers: message.headers,
            data: message.data,
            deliveries: letter.deliveries ?? message.deliveryCount,
            stream: message.stream,
            seq: message.seq,
            consumer: letter.consumer ?? message.consumer,
            ...(letter.part !== undefined ? { part: letter.part } : {}),
          });
        },
      };
      await handler(event as ReactorEvent<DomainEventLike>, states, ctx);
    },
  };
}

/** Decode a body the transport already parsed as JSON. */
