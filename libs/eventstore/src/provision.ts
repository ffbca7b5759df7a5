import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  RetentionPolicy,
  StorageType,
  nanos,
  type ConsumerConfig,
  type JetStreamManager,
  type StreamConfig,
} from 'nats';
import { JsErrCode, ProvisionError, isNoResponders, isTimeout, jsErrCode } from './errors';
import { DeliverFrom, Discard, Retention, Storage, type ConsumerSpec, type StreamSpec, type TopologySpec } from './topology';

/**
 * JetStream API answers that mean "not now" rather than "no": a request that timed out (a busy or
 * electing cluster, a slow machine), no responder yet, and the cluster codes for a meta leader
 * being elected (10008), a request reaching a non-leader (10009) and no peers known yet to place
 * replicas on (10005). Provisioning retries these until its deadline.
 */
const TRANSIENT_API_CODES: ReadonlySet<number> = new Set([10005, 10008, 10009]);

/** True when a JetStream API failure may succeed if asked again shortly (see {@link TRANSIENT_API_CODES}). */
export function isTransientApiError(err: unknown): boolean {
  if (isTimeout(err) || isNoResponders(err)) return true;
  const code = jsErrCode(err);
  return code !== undefined && TRANSIENT_API_CODES.has(code);
}

/** How `provision` treats transient API failures. */
export interface ProvisionOptions {
  /**
   * How long one stream or consumer is retried after transient failures (timeouts, a cluster
   * electing its meta leader), in ms; default {@link PROVISION_RETRY_MS}. 0 fails on the first.
   */
  retryForMs?: number;
  /** Called before each retry (for a log line). */
  onRetry?: (what: string, err: unknown, attempt: number) => void;
  /** Called when a stream's byte limit was not lowered to its spec's (see {@link KeptLimit}; for a log line). */
  onLimitKept?: (kept: KeptLimit) => void;
}

/**
 * A `discard: new` stream whose spec asks for a byte limit it cannot take safely now: JetStream
 * applies a lower `max_bytes` by dropping the oldest messages at once, whatever the discard policy
 * (nats-server 2.9 and later: `provision-limit.int-spec.ts` shows it) — acknowledged messages
 * perhaps no consumer has read. So a limit is applied only when the stream holds at most the limit
 * less its headroom ({@link limitHeadroom}: a quarter of the limit, at most 64 MiB), room for what
 * publishers store between reading the stream's size and the server applying the update. Else its
 * limit is left as it was (the rest of the spec is applied); a later provision applies it once the
 * stream holds little enough (its messages age out), or a limit of at least `neededMaxBytes` is asked.
 */
export interface KeptLimit {
  stream: string;
  /** Bytes the stream held. */
  heldBytes: number;
  /** The limit the spec asks for. */
  wantedMaxBytes: number;
  /** The limit left in force (-1: none). */
  keptMaxBytes: number;
  /** The room the wanted limit must leave free ({@link limitHeadroom}). */
  headroomBytes: number;
  /** The smallest limit that would be applied now ({@link smallestLimitFor} of `heldBytes`). */
  neededMaxBytes: number;
  /** The most the stream may hold for the wanted limit to be applied (`wantedMaxBytes - headroomBytes`). */
  appliesAtHeldBytes: number;
  detail: string;
}

/** The most room a limit must leave free ({@link limitHeadroom}): 64 MiB. */
export const LIMIT_HEADROOM_CAP = 64 * 1024 * 1024;

/**
 * The room a new byte limit of a `discard: new` stream must leave free above what the stream holds
 * to be applied: a quarter of the limit, at most {@link LIMIT_HEADROOM_CAP}. What publishers store
 * while the update is on its way is taken from it; past it, JetStream would drop the oldest.
 */
export function limitHeadroom(maxBytes: number): number {
  return Math.min(Math.floor(maxBytes / 4), LIMIT_HEADROOM_CAP);
}

/** The smallest byte limit a stream holding `held` bytes takes now: the least `L` with `held + limitHeadroom(L) <= L`. */
export function smallestLimitFor(held: number): number {
  if (held <= 0) return 1;
  // L - floor(L/4) = ceil(3L/4) >= held below the cap; held + cap above it.
  let limit = Math.max(held, Math.min(held + LIMIT_HEADROOM_CAP, Math.floor((4 * held) / 3)));
  while (!limitFits(limit, held)) limit++;
  while (limit > held && limitFits(limit - 1, held)) limit--;
  return limit;
}

/** How long `provision` retries one stream or consumer through transient failures by default. */
export const PROVISION_RETRY_MS = 60_000;

/**
 * Run one JetStream API call, asking again after a transient failure (backoff 250 ms doubling to
 * 4 s) until `deadline`, then throw a {@link ProvisionError} naming the call; any other failure is
 * thrown as it came. A create that timed out may have been carried out: asked again, the server
 * answers as for an existing stream or consumer, which the callers handle (re-read and compare).
 */
async function transient<T>(what: string, call: () => Promise<T>, deadline: number, options: ProvisionOptions): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      if (!isTransientApiError(err)) throw err;
      const wait = Math.min(4000, 250 * 2 ** (attempt - 1));
      if (Date.now() + wait > deadline) {
        throw new ProvisionError(`${what}: still failing after ${attempt} attempt(s): ${(err as Error).message}`, { cause: err });
      }
      options.onRetry?.(what, err, attempt);
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

/** What `provision` did to each stream and consumer. */
export type ProvisionAction = 'created' | 'updated' | 'unchanged';
export interface ProvisionReport {
  streams: Record<string, ProvisionAction>;
  consumers: Record<string, ProvisionAction>;
}

function retentionPolicy(retention: Retention): RetentionPolicy {
  switch (retention) {
    case Retention.limits:
      return RetentionPolicy.Limits;
    case Retention.workqueue:
      return RetentionPolicy.Workqueue;
    case Retention.interest:
      return RetentionPolicy.Interest;
    default:
      return assertNever(retention);
  }
}

function storageType(storage: Storage): StorageType {
  switch (storage) {
    case Storage.file:
      return StorageType.File;
    case Storage.memory:
      return StorageType.Memory;
    default:
      return assertNever(storage);
  }
}

function discardPolicy(discard: Discard | undefined): DiscardPolicy {
  return discard === Discard.new ? DiscardPolicy.New : DiscardPolicy.Old;
}

/**
 * Whether a stream holding `held` bytes may take `maxBytes` as its limit without JetStream
 * dropping any of its messages: with {@link limitHeadroom} to spare for what publishers store
 * while the update is applied.
 */
export function limitFits(maxBytes: number, held: number): boolean {
  return held + limitHeadroom(maxBytes) <= maxBytes;
}

function deliverPolicy(from: DeliverFrom): DeliverPolicy {
  switch (from) {
    case DeliverFrom.all:
      return DeliverPolicy.All;
    case DeliverFrom.new:
      return DeliverPolicy.New;
    default:
      return assertNever(from);
  }
}

function assertNever(value: never): never {
  throw new Error(`unhandled value ${String(value)}`);
}

/** The server config a stream spec stands for (only the fields Baton sets). */
export function streamConfig(spec: StreamSpec): Partial<StreamConfig> {
  const cfg: Partial<StreamConfig> = {
    name: spec.name,
    subjects: [...spec.subjects],
    retention: retentionPolicy(spec.retention),
    storage: storageType(spec.storage),
    num_replicas: spec.replicas,
    duplicate_window: nanos(spec.duplicateWindowMs),
    discard: discardPolicy(spec.discard),
    max_age: nanos(spec.maxAgeMs ?? 0),
    max_bytes: spec.maxBytes !== undefined && spec.maxBytes > 0 ? spec.maxBytes : -1,
    deny_delete: spec.denyDelete ?? false,
    deny_purge: spec.denyPurge ?? false,
  };
  if (spec.description !== undefined) cfg.description = spec.description;
  if (spec.maxMsgSize !== undefined) cfg.max_msg_size = spec.maxMsgSize;
  if (spec.maxMsgsPerSubject !== undefined) cfg.max_msgs_per_subject = spec.maxMsgsPerSubject;
  return cfg;
}

/** The server config a consumer spec stands for: a durable pull consumer with explicit ack. */
export function consumerConfig(spec: ConsumerSpec): Partial<ConsumerConfig> {
  const cfg: Partial<ConsumerConfig> = {
    durable_name: spec.durable,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: deliverPolicy(spec.deliverFrom ?? DeliverFrom.all),
    ack_wait: nanos(spec.ackWaitMs ?? 30_000),
    max_deliver: spec.maxDeliver ?? -1,
    max_ack_pending: spec.maxAckPending ?? 1000,
  };
  if (spec.filterSubject !== undefined) cfg.filter_subject = spec.filterSubject;
  if (spec.description !== undefined) cfg.description = spec.description;
  if (spec.inactiveThresholdMs !== undefined && spec.inactiveThresholdMs > 0) cfg.inactive_threshold = nanos(spec.inactiveThresholdMs);
  return cfg;
}

/** Keys of `want` whose value differs on the server (arrays compared as sorted sets). */
function differences(want: object, have: object): string[] {
  const haveRecord = have as Record<string, unknown>;
  const diffs: string[] = [];
  for (const [key, value] of Object.entries(want)) {
    const current = haveRecord[key];
    const same = Array.isArray(value)
      ? Array.isArray(current) && JSON.stringify([...value].sort()) === JSON.stringify([...current].sort())
      : value === current || (value === false && current === undefined) || (value === '' && current === undefined);
    if (!same) diffs.push(key);
  }
  return diffs;
}

const IMMUTABLE_STREAM_FIELDS = ['storage', 'retention', 'name'];
const IMMUTABLE_CONSUMER_FIELDS = ['deliver_policy', 'ack_policy', 'durable_name'];

async function provisionStream(jsm: JetStreamManager, spec: StreamSpec, options: ProvisionOptions): Promise<ProvisionAction> {
  const want = streamConfig(spec);
  const deadline = Date.now() + (options.retryForMs ?? PROVISION_RETRY_MS);
  for (let attempt = 0; ; attempt++) {
    const info = await transient(
      `stream info ${spec.name}`,
      () =>
        jsm.streams.info(spec.name).catch((err: unknown) => {
          if (jsErrCode(err) === JsErrCode.streamNotFound) return null;
          throw err;
        }),
      deadline,
      options,
    );
    if (info === null) {
      try {
        await transient(`stream create ${spec.name}`, () => jsm.streams.add(want), deadline, options);
        return 'created';
      } catch (err) {
        // Out of time for transient failures.
        if (err instanceof ProvisionError) throw err;
        // Another instance created it between our info and add: compare with what it made. A
        // create racing another create of the same stream may instead be refused for overlapping
        // subjects; reading it again finds the stream (or, for a genuinely different stream on
        // those subjects, finds none and ends here after the last attempt).
        if ((jsErrCode(err) === JsErrCode.streamNameInUse || jsErrCode(err) === JsErrCode.streamSubjectOverlap) && attempt < 3) continue;
        // The server lost a race over its own storage directory (see JsErrCode.streamStoreFailed): try again.
        if (jsErrCode(err) === JsErrCode.streamStoreFailed && attempt < 3) {
          await new Promise((resolve) => setTimeout(resolve, 100 * (attempt + 1)));
          continue;
        }
        throw new ProvisionError(`cannot create stream ${spec.name}: ${(err as Error).message}`, { cause: err });
      }
    }
    // A stream that must never drop what it acknowledged does not take a limit below what it holds.
    const target: Partial<StreamConfig> = { ...want };
    const wanted = want.max_bytes ?? -1;
    const current = info.config.max_bytes ?? -1;
    if (spec.discard === Discard.new && wanted > 0 && (current <= 0 || wanted < current) && !limitFits(wanted, info.state.bytes)) {
      target.max_bytes = current;
      const held = info.state.bytes;
      const headroom = limitHeadroom(wanted);
      const needed = smallestLimitFor(held);
      const appliesAt = wanted - headroom;
      options.onLimitKept?.({
        stream: spec.name,
        heldBytes: held,
        wantedMaxBytes: wanted,
        keptMaxBytes: current,
        headroomBytes: headroom,
        neededMaxBytes: needed,
        appliesAtHeldBytes: appliesAt,
        detail:
          `max_bytes ${wanted} not applied: the stream holds ${held} bytes, and a new limit must leave a quarter of itself ` +
          `(at most 64 MiB: ${headroom} bytes for this one) free above what it holds, since JetStream lowers a limit by dropping ` +
          `the oldest messages, whatever the discard policy, and publishes may land while it is applied. ` +
          `It needs max_bytes >= ${needed}, or the stream to hold <= ${appliesAt} bytes (its messages age out); ` +
          `${current > 0 ? `max_bytes ${current}` : 'no limit'} stays in force until then (docs/sre.md, Capacity)`,
      });
    }
    const diffs = differences(target, info.config);
    if (diffs.length === 0) return 'unchanged';
    const immutable = diffs.filter((key) => IMMUTABLE_STREAM_FIELDS.includes(key));
    if (immutable.length > 0) {
      throw new ProvisionError(`stream ${spec.name} exists with a different ${immutable.join(', ')}; these cannot be changed in place (migrate the stream)`);
    }
    try {
      await transient(`stream update ${spec.name}`, () => jsm.streams.update(spec.name, target), deadline, options);
      return 'updated';
    } catch (err) {
      throw new ProvisionError(`cannot update stream ${spec.name} (${diffs.join(', ')}): ${(err as Error).message}`, { cause: err });
    }
  }
}

/**
 * A durable the consumer runner re-created after it was lost (`by_start_sequence`, starting after
 * the ack floor it knew: see `runConsumer`) stands for the spec it was made from, whatever the
 * spec's `deliverFrom`: where a consumer starts matters only when it is first created.
 */
function recreatedAfterLoss(want: Partial<ConsumerConfig>, have: ConsumerConfig): Partial<ConsumerConfig> {
  if (have.deliver_policy !== DeliverPolicy.StartSequence || want.deliver_policy === DeliverPolicy.StartSequence) return want;
  const kept: Partial<ConsumerConfig> = { ...want, deliver_policy: have.deliver_policy };
  if (have.opt_start_seq !== undefined) kept.opt_start_seq = have.opt_start_seq;
  return kept;
}

async function provisionConsumer(jsm: JetStreamManager, spec: ConsumerSpec, options: ProvisionOptions): Promise<ProvisionAction> {
  const wanted = consumerConfig(spec);
  const name = `${spec.stream}/${spec.durable}`;
  const deadline = Date.now() + (options.retryForMs ?? PROVISION_RETRY_MS);
  for (let attempt = 0; ; attempt++) {
    const info = await transient(
      `consumer info ${name}`,
      () =>
        jsm.consumers.info(spec.stream, spec.durable).catch((err: unknown) => {
          if (jsErrCode(err) === JsErrCode.consumerNotFound) return null;
          throw err;
        }),
      deadline,
      options,
    );
    if (info === null) {
      try {
        await transient(
          `consumer create ${name}`,
          () =>
            jsm.consumers.add(
              spec.stream,
              spec.startAfterSeq !== undefined && spec.startAfterSeq > 0
                ? { ...wanted, deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: spec.startAfterSeq + 1 }
                : wanted,
            ),
          deadline,
          options,
        );
        return 'created';
      } catch (err) {
        if (err instanceof ProvisionError) throw err;
        // Lost a creation race with another instance: re-read and compare.
        if (attempt < 3) continue;
        throw new ProvisionError(`cannot create consumer ${spec.stream}/${spec.durable}: ${(err as Error).message}`, { cause: err });
      }
    }
    const want = recreatedAfterLoss(wanted, info.config);
    const diffs = differences(want, info.config);
    if (diffs.length === 0) return 'unchanged';
    const immutable = diffs.filter((key) => IMMUTABLE_CONSUMER_FIELDS.includes(key));
    if (immutable.length > 0) {
      throw new ProvisionError(`consumer ${spec.stream}/${spec.durable} exists with a different ${immutable.join(', ')}; delete it or pick a new durable name`);
    }
    try {
      await transient(`consumer update ${name}`, () => jsm.consumers.update(spec.stream, spec.durable, want), deadline, options);
      return 'updated';
    } catch (err) {
      throw new ProvisionError(`cannot update consumer ${spec.stream}/${spec.durable} (${diffs.join(', ')}): ${(err as Error).message}`, { cause: err });
    }
  }
}

/**
 * Make the server's streams and durable consumers match their specs: create what is missing,
 * update what differs in an editable field, leave the rest alone. Idempotent, and safe when
 * several instances provision at once (a lost creation race is resolved by re-reading and
 * comparing). Streams are provisioned before consumers. Throws {@link ProvisionError} when an
 * existing stream or consumer differs in a field the server cannot change (storage, retention,
 * deliver policy). Transient API failures — a timeout, a cluster electing its meta leader — are
 * retried for `options.retryForMs` per stream or consumer (default a minute); past that, or on
 * any other failure, a {@link ProvisionError} names the call that failed. A `discard: new` stream
 * is never given a byte limit below what it holds: its former limit stays
 * ({@link KeptLimit}, told to `options.onLimitKept`).
 */
export async function provision(jsm: JetStreamManager, specs: Partial<TopologySpec>, options: ProvisionOptions = {}): Promise<ProvisionReport> {
  const report: ProvisionReport = { streams: {}, consumers: {} };
  for (const stream of specs.streams ?? []) report.streams[stream.name] = await provisionStream(jsm, stream, options);
  for (const consumer of specs.consumers ?? []) {
    report.consumers[`${consumer.stream}/${consumer.durable}`] = await provisionConsumer(jsm, consumer, options);
  }
  return report;
}

/** A durable consumer Baton no longer reads, and the stream it was on. */
export interface RetiredConsumer {
  stream: string;
  durable: string;
}

/** What {@link retireConsumers} did to each retired durable (`<stream>/<durable>`). */
export type RetireAction = 'deleted' | 'absent';

/**
 * Delete durable consumers a newer Baton no longer reads. A durable nobody pulls keeps a cursor on
 * its stream and a pending count that grows with every message, which monitoring (and anything
 * waiting for consumers to drain) reads as a consumer falling behind. Idempotent: a durable already
 * gone (or never created) is `absent`; several instances retiring at once is safe. Transient API
 * failures are retried as `provision` retries them.
 */
export async function retireConsumers(
  jsm: JetStreamManager,
  retired: readonly RetiredConsumer[],
  options: ProvisionOptions = {},
): Promise<Record<string, RetireAction>> {
  const report: Record<string, RetireAction> = {};
  for (const { stream, durable } of retired) {
    const name = `${stream}/${durable}`;
    const deadline = Date.now() + (options.retryForMs ?? PROVISION_RETRY_MS);
    try {
      await transient(`consumer delete ${name}`, () => jsm.consumers.delete(stream, durable), deadline, options);
      report[name] = 'deleted';
    } catch (err) {
      const code = jsErrCode(err);
      if (code !== JsErrCode.consumerNotFound && code !== JsErrCode.streamNotFound) {
        if (err instanceof ProvisionError) throw err;
        throw new ProvisionError(`cannot delete retired consumer ${name}: ${(err as Error).message}`, { cause: err });
      }
      report[name] = 'absent';
    }
  }
  return report;
}
