import { BaseRpcContext } from '@nestjs/microservices';
import type { ConsumedMessage, DomainEventLike, Reactor, ReactorEdge } from '@baton/eventstore';
import { traceIdFromHeaders } from '@baton/eventstore';

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

  private get message(): ConsumedMessage {
    return this.args[0];
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
    return this.reactors.edge.deliver(table, this.message, { body: this.reactors.body });
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
  /** The W3C trace id the message's `traceparent` header carries, or null. */
  get traceId(): string | null {
    return traceIdFromHeaders(this.message.headers);
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
