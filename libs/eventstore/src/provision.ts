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
import { DeliverFrom, Retention, Storage, type ConsumerSpec, type StreamSpec, type TopologySpec } from './topology';

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
    discard: DiscardPolicy.Old,
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
    const diffs = differences(want, info.config);
    if (diffs.length === 0) return 'unchanged';
    const immutable = diffs.filter((key) => IMMUTABLE_STREAM_FIELDS.includes(key));
    if (immutable.length > 0) {
      throw new ProvisionError(`stream ${spec.name} exists with a different ${immutable.join(', ')}; these cannot be changed in place (migrate the stream)`);
    }
    try {
      await transient(`stream update ${spec.name}`, () => jsm.streams.update(spec.name, want), deadline, options);
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
 * any other failure, a {@link ProvisionError} names the call that failed.
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
