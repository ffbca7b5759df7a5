import { BaseRpcContext } from '@nestjs/microservices';
import type { ConsumedMessage, DomainEventLike, HopTrace, Reactor, ReactorEdge } from '@baton/eventstore';
import { hopTrace } from '@baton/eventstore';

/**
 * The per-message context a `@EventPattern` handler bound by {@link JetStreamServer} receives
 * (`@Ctx() ctx: JetStreamContext`): subject, headers and delivery metadata.
 */
export class JetStreamContext extends BaseRpcContext<[ConsumedMessage]> {
  /** @param reactors the transport's reactor edge and the body it parsed (null when the transport has no `events`). */
  constructor(
    args: [ConsumedMessage],
    private readonly reactors: { edge: ReactorEdge; body: unknown } | null = null,
  ) {
    super(args);
  }

  private hop: HopTrace | undefined;

  private get message(): ConsumedMessage {
    return this.args[0];
  }

  /**
   * This hop's trace: the message's `traceparent` with a span id of this hop's own (a new trace
   * when it carries none). Pass it on to what the handler appends (`CommandMeta.trace`) and asks
   * of the ledger (`LedgerCallOptions.trace`); the same value for the whole handling.
   */
  get trace(): HopTrace {
    return (this.hop ??= hopTrace(this.message.headers));
  }

  /**
   * Hand this stored event to a reactor table: the transport's edge checks that it is an event of
   * `<prefix>.ev.<project>.<kind>.<id>` whose envelope names that aggregate (else PoisonError
   * `identity_mismatch`), decodes it (else PoisonError with the registry's code), reads the
   * aggregate's state before and after it from the event store's fold cache and calls the table's
   * handler for its type (none: nothing to do). Resolving acknowledges; a TransientError retries;
   * a PoisonError dead-letters.
   */
  react<E extends DomainEventLike, S>(table: Reactor<E, S>): Promise<void> {
    if (!this.reactors)
      return Promise.reject(new Error(`${table.name}: the JetStream transport was started without \`events\` (registry and store), which reactors need`));
    return this.reactors.edge.deliver(table, this.message, { body: this.reactors.body, trace: this.trace });
  }
  get subject(): string {
    return this.message.subject;
  }
  get headers(): Record<string, string[]> {
    return this.message.headers;
  }
  /** Stream sequence: projections store it to make replays idempotent. */
  get seq(): number {
    return this.message.seq;
  }
  /** When the stream stored the message (its JetStream timestamp), ISO 8601. */
  get storedAt(): string {
    return new Date(this.message.timestampMs).toISOString();
  }
  /** 1 on first delivery. */
  get deliveryCount(): number {
    return this.message.deliveryCount;
  }
  get stream(): string {
    return this.message.stream;
  }
  get consumer(): string {
    return this.message.consumer;
  }
  /** The first value of a header, if present. */
  header(name: string): string | undefined {
    return this.message.headers[name]?.[0];
  }
  /** The W3C trace id this hop continues (see {@link trace}). */
  get traceId(): string {
    return this.trace.traceId;
  }
  /** The raw bytes as published. */
  get data(): Uint8Array {
    return this.message.data;
  }
  /** The client message itself (escape hatch). */
  getMessage(): ConsumedMessage['raw'] {
    return this.message.raw;
  }
  getSubject(): string {
    return this.subject;
  }
  getHeaders(): Record<string, string[]> {
    return this.headers;
  }
}

/** Context of a `@MessagePattern` request received over core NATS. */
export class NatsRequestContext extends BaseRpcContext<[string, Record<string, string[]>]> {
  private hop: HopTrace | undefined;

  /** This request's hop trace (see {@link JetStreamContext.trace}). */
  get trace(): HopTrace {
    return (this.hop ??= hopTrace(this.args[1]));
  }
  get subject(): string {
    return this.args[0];
  }
  get headers(): Record<string, string[]> {
    return this.args[1];
  }
  header(name: string): string | undefined {
    return this.args[1][name]?.[0];
  }
  getSubject(): string {
    return this.subject;
  }
}
