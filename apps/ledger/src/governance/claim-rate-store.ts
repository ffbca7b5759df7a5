import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { isKvRevisionConflict, openKvBucket, streamStem, type KvBucket } from '@baton/eventstore';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { LEDGER_CONFIG, type LedgerConfig } from '../config';
import { ClaimCaps, ClaimWindow, type ClaimWindowState, type RateRefusal } from './rate-limiter';

/** Injection token for the {@link ClaimWindow} (one minute; tests may shorten it). */
export const CLAIM_WINDOW = Symbol('CLAIM_WINDOW');

/** The KV bucket of a Baton prefix's claim counters: `<PREFIX>_CLAIM_RATES` (stream `KV_<PREFIX>_CLAIM_RATES`). */
export function claimRateBucket(prefix: string): string {
  return `${streamStem(prefix)}_CLAIM_RATES`;
}

/** Agent names are used as they are; other actor names (they may hold `.`, `:`, `@`) are encoded. */
const PLAIN_NAME = /^[A-Za-z0-9_-]+$/;

/** The key of one actor's counters in one project: `<project>.<agent>`. */
export function claimRateKey(project: string, actor: string): string {
  // `=` never appears in a plain name, so an encoded name cannot collide with one.
  return `${project}.${PLAIN_NAME.test(actor) ? actor : `=${Buffer.from(actor, 'utf8').toString('base64url')}`}`;
}

/** A counted claim: where to give it back if the claim is not granted after all. */
export interface ClaimTicket {
  key: string;
  slot: number;
}

/** Whether a claim may go ahead: with a ticket (null when the actor has no cap), or refused. */
export type ClaimAdmission = { granted: true; ticket: ClaimTicket | null } | { granted: false; refusal: RateRefusal };

/** Compare-and-set attempts per update before the claim is answered `unavailable`. */
const MAX_ATTEMPTS = 8;
/** Timeout of each KV request: a stuck KV answers the claim before the caller's own request times out. */
const KV_TIMEOUT_MS = 2_000;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The per-agent claim cap, shared by every ledger instance of a Baton prefix through one JetStream
 * KV bucket, so the cap holds for the agent however many ledgers serve it.
 *
 * Storage: bucket {@link claimRateBucket} (history 1, replicas `BATON_STREAM_REPLICAS`, file
 * storage, max age {@link ClaimWindow.retentionMs} so keys of idle agents expire on their own),
 * created at start when any cap is set; creating it from several instances at once is fine (the
 * same configuration is accepted twice, and a failed attempt is retried, finding the bucket).
 * Key {@link claimRateKey}; value a {@link ClaimWindowState} (at most 31 small counters). Only
 * features of nats-server 2.9 are used: a KV bucket with `max_age`, and writes conditioned on the
 * key's last revision (`kv.create` for a new key, `kv.update(key, value, revision)` otherwise).
 * Reads go to the stream leader (no direct get), so a read is never staler than the revision the
 * write is checked against, and a conflict means another instance really wrote in between.
 *
 * Ordering: take a place, then decide, then give the place back when the claim was not granted.
 * `take` counts the claim with compare-and-set BEFORE the handoff decider runs; the ledger calls
 * `refund` when the claim turned out not to be granted (refused by the decider, a retry of a claim
 * already made, or a conflict on the handoff that appended nothing). So the cap holds exactly
 * across instances: every granted claim was counted first, and the counter is only ever changed
 * by compare-and-set. The cost is on the safe side: while a claim that will lose is being decided
 * (milliseconds), its place is taken and a concurrent claim by the same agent may be refused
 * although it would have fit (it gets `retry_after_ms` and comes back). A claim whose append
 * failed with an ambiguous error (a timeout: it may have been stored) keeps its place, and so does
 * one whose refund could not be written: both under-count the agent's remaining claims until the
 * window moves on, never over-count. Counting after the grant (check, decide, record) would have
 * let every claim checked at the same moment through, across instances.
 *
 * Within one instance the updates of one key run one at a time, so compare-and-set conflicts only
 * come from other instances. A conflict is retried (fresh read, recomputed value) up to
 * {@link MAX_ATTEMPTS} times; then, or when the KV cannot be reached, `take` throws and the claim
 * is answered `unavailable`. After a failure the bucket is opened again on the next use, which
 * recreates it if it was deleted (its counts are then lost: the one way the cap can be exceeded,
 * besides clock skew between instances; see {@link ClaimWindow}).
 *
 * With every cap 0 (the default) nothing touches the KV: no bucket, no reads, no writes.
 */
@Injectable()
export class ClaimRateStore implements OnModuleInit {
  private readonly caps: ClaimCaps;
  private bucket: Promise<KvBucket> | null = null;
  /** The tail of each key's queue of updates in this instance. */
  private readonly lanes = new Map<string, Promise<unknown>>();

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(LEDGER_CONFIG) config: LedgerConfig,
    @Inject(CLAIM_WINDOW) private readonly window: ClaimWindow,
  ) {
    this.caps = new ClaimCaps(config.LEDGER_CLAIMS_PER_MINUTE, config.LEDGER_AGENT_CLAIM_CAPS);
  }

  /** Create (or find) the bucket at start, but only when some agent has a cap. */
  async onModuleInit(): Promise<void> {
    if (this.caps.active) await this.open();
  }

  /** The cap of `actor` (0 = none). */
  capOf(actor: string): number {
    return this.caps.capOf(actor);
  }

  /**
   * Count one claim by `actor` in `project` against its cap, or refuse it. Resolves at once, with
   * no KV traffic, when the actor has no cap. Throws when the KV cannot be used.
   */
  async take(project: string, actor: string): Promise<ClaimAdmission> {
    const limit = this.caps.capOf(actor);
    if (limit <= 0) return { granted: true, ticket: null };
    const key = claimRateKey(project, actor);
    return this.update(key, (state, now): { write: ClaimWindowState | null; result: ClaimAdmission } => {
      const taken = this.window.take(state, limit, now);
      if (!taken.granted) return { write: null, result: { granted: false, refusal: taken.refusal } };
      return { write: taken.state, result: { granted: true, ticket: { key, slot: taken.slot } } };
    });
  }

  /** Give back the place of a claim that was not granted. Never throws: a failure is logged (and under-counts). */
  async refund(ticket: ClaimTicket): Promise<void> {
    try {
      await this.update(ticket.key, (state, now) => ({ write: this.window.refund(state, ticket.slot, now), result: undefined }));
    } catch (error) {
      this.runtime.logger.warn('cannot give back a claim rate place', { key: ticket.key, error: error instanceof Error ? error.message : String(error) });
    }
  }

  /** Read, compute, compare-and-set; one update of `key` at a time in this instance. */
  private update<T>(key: string, step: (state: ClaimWindowState | null, now: number) => { write: ClaimWindowState | null; result: T }): Promise<T> {
    const previous = this.lanes.get(key) ?? Promise.resolve();
    const run = previous.then(() => this.compareAndSet(key, step));
    const tail = run.catch(() => undefined);
    this.lanes.set(key, tail);
    void tail.then(() => {
      if (this.lanes.get(key) === tail) this.lanes.delete(key);
    });
    return run;
  }

  private async compareAndSet<T>(
    key: string,
    step: (state: ClaimWindowState | null, now: number) => { write: ClaimWindowState | null; result: T },
  ): Promise<T> {
    try {
      const kv = await this.open();
      for (let attempt = 1; ; attempt++) {
        const entry = await kv.get(key);
        const state = entry !== null && entry.value !== null ? this.window.decode(entry.value) : null;
        const { write, result } = step(state, Date.now());
        if (write === null) return result;
        try {
          const bytes = this.window.encode(write);
          if (entry) await kv.update(key, bytes, entry.revision);
          else await kv.create(key, bytes);
          return result;
        } catch (error) {
          if (!isKvRevisionConflict(error)) throw error; // `wrong last sequence`: another ledger instance wrote the key
          if (attempt >= MAX_ATTEMPTS) throw new Error(`the claim counter ${key} kept changing under ${MAX_ATTEMPTS} attempts`, { cause: error });
          await sleep(1 + Math.floor(Math.random() * 4 * attempt));
        }
      }
    } catch (error) {
      this.bucket = null; // open it again next time (recreating it if it was deleted)
      const message = error instanceof Error ? error.message : String(error);
      throw new Error(`claim rate bucket ${claimRateBucket(this.runtime.config.BATON_PREFIX)}: ${message}`, { cause: error });
    }
  }

  private open(): Promise<KvBucket> {
    this.bucket ??= this.create().catch((error: unknown) => {
      this.bucket = null;
      throw error;
    });
    return this.bucket;
  }

  private async create(): Promise<KvBucket> {
    const name = claimRateBucket(this.runtime.config.BATON_PREFIX);
    for (let attempt = 1; ; attempt++) {
      try {
        return await openKvBucket(this.runtime.nats, name, {
          description: 'Baton: claims per agent in the current rate window',
          history: 1,
          ttlMs: this.window.retentionMs,
          replicas: this.runtime.config.BATON_STREAM_REPLICAS,
          allowDirect: false,
          timeoutMs: KV_TIMEOUT_MS,
        });
      } catch (error) {
        // Two instances creating it at once: the loser finds it on the next attempt.
        if (attempt >= 3) throw error;
        await sleep(25 * attempt);
      }
    }
  }
}
