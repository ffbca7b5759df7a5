import { Inject, Injectable, Optional, type OnModuleDestroy } from '@nestjs/common';
import { clipText, Limits, ledgerCommandSubject, offeredHandoff, parseUntrustedJson, Principals, Subjects, type EdgeRoute } from '@baton/contracts';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { LedgerCommands } from '../commands/ledger-commands';

/**
 * How long after an agent terminated an offer (`+TERM`) the ledger waits before giving the offer up
 * for it: the SDK terminates first and then sends its own `give_up_offer`, with the handler's
 * error as the reason; that one is the record when it comes (this one then names an offer the
 * handoff no longer holds and changes nothing).
 */
export const TERMINATED_OFFER_GRACE_MS = 5_000;

/** Injection token of the grace (ms) when it is not {@link TERMINATED_OFFER_GRACE_MS} (tests). */
export const TERMINATED_OFFER_GRACE = Symbol('TERMINATED_OFFER_GRACE');

/** Terminations waiting for their grace at once, per ledger instance; past it one is given up at once. */
const WAITING_MAX = 10_000;

/** An acknowledgement body that terminates the message (`+TERM`, or `+TERM <reason>`). */
export function isTermination(body: Uint8Array): boolean {
  // '+TERM' is 5 bytes; anything longer must go on with a space.
  if (body.length < 5 || body[0] !== 0x2b || body[1] !== 0x54 || body[2] !== 0x45 || body[3] !== 0x52 || body[4] !== 0x4d) return false;
  return body.length === 5 || body[5] === 0x20;
}

/** The reason a `+TERM <reason>` gave, else what the record says instead; within the short-text cap and never blank. */
function terminationReason(body: Uint8Array, deliveries: number): string {
  const given = new TextDecoder().decode(body.subarray(5)).replace(/\s+/g, ' ').trim();
  const text = `offer terminated (+TERM) after ${deliveries} deliver${deliveries === 1 ? 'y' : 'ies'} without a give-up${given !== '' ? `: ${given}` : ''}`;
  return clipText(text);
}

/** What one termination names: the offer (by its stream sequence) and how often it was delivered. */
interface Termination {
  project: string;
  agent: string;
  stream: string;
  seq: number;
  deliveries: number;
  body: Uint8Array;
}

/**
 * Nothing offered is left silently pending when an agent terminates its offer (`+TERM`) without
 * `give_up_offer` (a client other than the SDK; or the SDK's own give-up never reached the ledger):
 * the edge hands each termination it relays here, and after {@link TERMINATED_OFFER_GRACE_MS} the
 * ledger reads the offer the acknowledgement names and gives it up as that agent — the principal
 * the edge subject names, which the server pins — naming the version the offer carried. So it
 * counts as a retry and is offered again, or escalates at the cap, or fails a returnable child,
 * exactly as the SDK's give-up would (docs/handoffs.md rule 5a). A give-up already recorded for
 * that offer (the SDK's), a claim, or a handoff that moved on makes this one change nothing
 * (`stale_offer`, `handoff_not_pending`). Best effort for what it cannot read: an offer no longer in
 * the inbox stream, or bytes that name no handoff, are logged and left.
 */
@Injectable()
export class TerminatedOffers implements OnModuleDestroy {
  private readonly waiting = new Map<string, { timer: NodeJS.Timeout; termination: Termination }>();
  private readonly running = new Set<Promise<void>>();
  private stopped = false;
  private readonly graceMs: number;

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(LedgerCommands) private readonly commands: LedgerCommands,
    @Optional() @Inject(TERMINATED_OFFER_GRACE) graceMs: number | null = null,
  ) {
    this.graceMs = graceMs ?? TERMINATED_OFFER_GRACE_MS;
  }

  /**
   * An acknowledgement the edge relayed for `route`'s agent (of its own offers durable; `route.ack`
   * names the message): when it terminates the message, give the offer up after the grace.
   */
  observe(route: Extract<EdgeRoute, { kind: 'ack' }>, body: Uint8Array): void {
    if (this.stopped || !isTermination(body)) return;
    const { stream, consumer, deliveries, streamSeq: seq } = route.ack;
    if (!Number.isSafeInteger(seq) || seq < 1 || !Number.isSafeInteger(deliveries) || deliveries < 1) return;
    const key = `${stream}.${consumer}.${seq}`;
    if (this.waiting.has(key)) return;
    const termination: Termination = { project: route.project, agent: route.agent, stream, seq, deliveries, body: body.slice() };
    if (this.waiting.size >= WAITING_MAX) {
      this.track(this.giveUp(termination));
      return;
    }
    const timer = setTimeout(() => {
      this.waiting.delete(key);
      this.track(this.giveUp(termination));
    }, this.graceMs);
    timer.unref();
    this.waiting.set(key, { timer, termination });
  }

  /** Terminations still in their grace (tests and health). */
  waitingCount(): number {
    return this.waiting.size;
  }

  /** At shutdown the terminations still waiting are given up at once, not dropped with the process. */
  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    for (const { timer, termination } of this.waiting.values()) {
      clearTimeout(timer);
      this.track(this.giveUp(termination));
    }
    this.waiting.clear();
    await Promise.allSettled([...this.running]);
  }

  private track(work: Promise<void>): void {
    this.running.add(work);
    void work.finally(() => this.running.delete(work));
  }

  private async giveUp(t: Termination): Promise<void> {
    const prefix = this.runtime.config.BATON_PREFIX;
    const log = this.runtime.logger.child({ project: t.project, agent: t.agent, offer_seq: t.seq });
    try {
      const stored = await this.runtime.nats.jsm.streams.getMessage(t.stream, { seq: t.seq }).catch(() => null);
      // Only the agent's own offer: the edge already pinned the durable, and its filter the subject.
      if (stored === null || stored.subject !== Subjects.offer(prefix, t.project, t.agent)) {
        log.info('a terminated offer could not be read: not given up for its agent', { found: stored?.subject ?? null });
        return;
      }
      const decoded = parseUntrustedJson(new TextDecoder().decode(stored.data), Limits.maxMessageBytes);
      const offered = decoded.ok ? offeredHandoff(decoded.value) : null;
      if (offered === null) {
        log.info('a terminated offer names no handoff: nothing to give up');
        return;
      }
      const body = {
        handoff_id: offered.handoffId,
        ...(offered.version !== undefined ? { offered_version: offered.version } : {}),
        deliveries: t.deliveries,
        reason: terminationReason(t.body, t.deliveries),
        idempotency_key: `give_up:${offered.handoffId}:${t.seq}:term`,
      };
      const reply = await this.commands.handle({
        subject: ledgerCommandSubject(prefix, t.project, Principals.agent(t.project, t.agent), 'give_up_offer'),
        headers: {},
        data: new TextEncoder().encode(JSON.stringify(body)),
      });
      const outcome = reply === null ? 'unanswered' : 'ok' in reply && reply.ok ? 'given_up' : `refused ${'error' in reply ? reply.error.code : ''}`.trim();
      log.info('an offer its agent terminated was given up for it', { handoff_id: offered.handoffId, outcome });
    } catch (error) {
      log.error('giving up a terminated offer failed', error instanceof Error ? error : { error: String(error) });
    }
  }
}
