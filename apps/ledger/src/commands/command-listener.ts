import { Inject, Injectable, Optional, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { COMMAND_REFUSED_LETTERS } from '../edge/refusal-tokens';
import { LedgerErrorCode, LedgerErrorKind, parseLedgerCommandSubject, Subjects } from '@baton/contracts';
import { subscribeCore, type CoreMessage, type CoreSubscription } from '@baton/eventstore';
import type { CompleteThenCreateReply, LedgerReply, OpenOffersReply, ProjectControlReply } from '@baton/contracts';
import { METRICS, RUNTIME, type BatonMetrics, type RefusedLetters, type ServiceRuntime } from '@baton/platform';
import { LEDGER_CONFIG, type LedgerConfig } from '../config';
import { LedgerCommands } from './ledger-commands';

/** Queue group every ledger instance joins: each request is served by exactly one instance. */
export const LEDGER_QUEUE = 'ledger';

const encoder = new TextEncoder();

/** How long a caller refused `overloaded` is told to wait before sending again, ms. */
export const OVERLOADED_RETRY_AFTER_MS = 250;

/** How often the ledger logs that it is shedding requests (with how many since the last line), ms. */
const SHED_LOG_EVERY_MS = 5_000;

/**
 * Serves `<prefix>.cmd.ledger.>` (core NATS request/reply, queue group `ledger`: every
 * `<prefix>.cmd.ledger.<project>.<kind>.<name>.<command>`) and hands each request, with its
 * ORIGINAL bytes and subject (which names the caller), to {@link LedgerCommands}.
 *
 * Why not `@MessagePattern`: the JetStream transport JSON-parses a request before the handler runs
 * and keeps no bytes, so a malformed or oversized body could neither be dead-lettered with its
 * original bytes nor answered in the ledger's reply shape. This listener is the same subscription
 * the transport would make, plus those two things. On shutdown it drains the subscription and waits
 * for in-flight requests before the connection drains.
 */
@Injectable()
export class LedgerCommandListener implements OnApplicationBootstrap, OnModuleDestroy {
  private subscription: CoreSubscription | null = null;
  private readonly inFlight = new Set<Promise<void>>();
  private served = 0;
  private shed = 0;
  /** Requests shed since the last log line about it, and when that line was written. */
  private shedUnlogged = 0;
  private shedLoggedAt = 0;
  /** The `overloaded` reply, the same bytes every time (no work per shed request). */
  private readonly overloadedReply: Uint8Array;

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(LedgerCommands) private readonly commands: LedgerCommands,
    @Inject(COMMAND_REFUSED_LETTERS) private readonly refusedLetters: RefusedLetters,
    @Inject(LEDGER_CONFIG) private readonly config: Pick<LedgerConfig, 'LEDGER_MAX_INFLIGHT'>,
    @Optional() @Inject(METRICS) private readonly metrics: BatonMetrics | null = null,
  ) {
    this.overloadedReply = encoder.encode(
      JSON.stringify({
        ok: false,
        error: {
          code: LedgerErrorCode.overloaded,
          kind: LedgerErrorKind.unavailable,
          message: `the ledger is working on ${config.LEDGER_MAX_INFLIGHT} requests (LEDGER_MAX_INFLIGHT); nothing was done: send the same command again after retry_after_ms`,
          details: { retry_after_ms: OVERLOADED_RETRY_AFTER_MS, max_inflight: config.LEDGER_MAX_INFLIGHT },
        },
      }),
    );
  }

  async onApplicationBootstrap(): Promise<void> {
    const subject = Subjects.ledgerCommands(this.runtime.config.BATON_PREFIX);
    this.subscription = subscribeCore(
      this.runtime.nats,
      subject,
      (msg) => {
        // Admission: past the bound, the request is answered at once and nothing else is kept of it.
        if (this.inFlight.size >= this.config.LEDGER_MAX_INFLIGHT) {
          this.shedOne(msg);
          return;
        }
        const task = this.answer(msg).finally(() => this.inFlight.delete(task));
        this.inFlight.add(task);
      },
      { queue: LEDGER_QUEUE, onError: (err) => this.runtime.logger.error(`ledger subscription failed: ${err.message}`, { subject }) },
    );
    // The server knows the subscription before the service reports ready.
    await this.runtime.nats.connection.flush();
  }

  async onModuleDestroy(): Promise<void> {
    const subscription = this.subscription;
    this.subscription = null;
    if (subscription && !subscription.isClosed()) await subscription.drain().catch(() => undefined);
    await Promise.allSettled([...this.inFlight]);
    // Rejections counted in windows still open are summed up now, not dropped with the process.
    await this.refusedLetters.stop();
  }

  /** Requests this instance has answered (health and tests). */
  handledCount(): number {
    return this.served;
  }

  /** Requests this instance answered `overloaded` without working on them (health and tests). */
  shedCount(): number {
    return this.shed;
  }

  /**
   * Answer `overloaded` (a request without a reply subject is dropped: nobody waits for it, and so
   * is one whose reply subject the ledger may not answer on, `replyRefusalOf` — nothing is recorded
   * of a shed request), count it, log now and then.
   */
  private shedOne(msg: CoreMessage): void {
    this.shed++;
    this.shedUnlogged++;
    this.metrics?.ledgerRequestsShed.inc();
    if (msg.reply && this.commands.replyRefusalOf(parseLedgerCommandSubject(this.runtime.config.BATON_PREFIX, msg.subject), msg.reply) === null) {
      try {
        msg.respond(this.overloadedReply);
      } catch {
        // The connection is closing: the caller times out and sends again.
      }
    }
    const now = Date.now();
    if (now - this.shedLoggedAt >= SHED_LOG_EVERY_MS) {
      this.runtime.logger.warn('ledger at its in-flight bound: requests answered overloaded', {
        shed: this.shedUnlogged,
        in_flight: this.inFlight.size,
        max_inflight: this.config.LEDGER_MAX_INFLIGHT,
      });
      this.shedUnlogged = 0;
      this.shedLoggedAt = now;
    }
  }

  private async answer(msg: CoreMessage): Promise<void> {
    let reply: LedgerReply | ProjectControlReply | OpenOffersReply | CompleteThenCreateReply | null;
    try {
      reply = await this.commands.handle({ subject: msg.subject, headers: msg.headers, data: msg.data, ...(msg.reply ? { reply: msg.reply } : {}) });
    } catch (error) {
      this.runtime.logger.error('ledger request failed', error instanceof Error ? error : { error: String(error) });
      reply = { ok: false, error: { code: 'internal_error', kind: 'internal', message: 'the ledger failed; see its log' } };
    }
    this.served++;
    // null: the reply subject is not the sender's to name (refused and recorded by handle).
    if (!msg.reply || reply === null) return;
    try {
      msg.respond(encoder.encode(JSON.stringify(reply)));
    } catch (error) {
      this.runtime.logger.error(`cannot answer ${msg.subject}`, error instanceof Error ? error : { error: String(error) });
    }
  }
}
