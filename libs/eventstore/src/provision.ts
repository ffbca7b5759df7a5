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
import { JsErrCode, ProvisionError, jsErrCode } from './errors';
import { DeliverFrom, Retention, Storage, type ConsumerSpec, type StreamSpec, type TopologySpec } from './topology';

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

async function provisionStream(jsm: JetStreamManager, spec: StreamSpec): Promise<ProvisionAction> {
  const want = streamConfig(spec);
  for (let attempt = 0; ; attempt++) {
    const info = await jsm.streams.info(spec.name).catch((err: unknown) => {
      if (jsErrCode(err) === JsErrCode.streamNotFound) return null;
      throw err;
    });
    if (info === null) {
      try {
        await jsm.streams.add(want);
        return 'created';
      } catch (err) {
        // Another instance created it between our info and add: compare with what it made.
        if (jsErrCode(err) === JsErrCode.streamNameInUse && attempt < 3) continue;
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
      await jsm.streams.update(spec.name, want);
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

async function provisionConsumer(jsm: JetStreamManager, spec: ConsumerSpec): Promise<ProvisionAction> {
  const wanted = consumerConfig(spec);
  for (let attempt = 0; ; attempt++) {
    const info = await jsm.consumers.info(spec.stream, spec.durable).catch((err: unknown) => {
      if (jsErrCode(err) === JsErrCode.consumerNotFound) return null;
      throw err;
    });
    if (info === null) {
      try {
        await jsm.consumers.add(
          spec.stream,
          spec.startAfterSeq !== undefined && spec.startAfterSeq > 0
            ? { ...wanted, deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: spec.startAfterSeq + 1 }
            : wanted,
        );
        return 'created';
      } catch (err) {
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
      await jsm.consumers.update(spec.stream, spec.durable, want);
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
 * deliver policy).
 */
export async function provision(jsm: JetStreamManager, specs: Partial<TopologySpec>): Promise<ProvisionReport> {
  const report: ProvisionReport = { streams: {}, consumers: {} };
  for (const stream of specs.streams ?? []) report.streams[stream.name] = await provisionStream(jsm, stream);
  for (const consumer of specs.consumers ?? []) {
    report.consumers[`${consumer.stream}/${consumer.durable}`] = await provisionConsumer(jsm, consumer);
  }
  return report;
}
