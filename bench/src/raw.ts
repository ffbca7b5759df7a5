import { randomBytes } from 'node:crypto';
import type Redis from 'ioredis';
import type { NatsHandle } from '@baton/eventstore';
import { cpuFigures, type CpuReading } from './platform';
import { nowMs, summarize, type LatencySummary } from './stats';

/** What the broker and Redis do on this machine with no Baton code in the way. */
export interface RawCeilings {
  /** Payload bytes of every raw message (about the size of a Baton event). */
  payload_bytes: number;
  /** Acked JetStream publishes per second, `window` async publishes in flight. */
  js_publish_per_s: number;
  window: number;
  /**
   * CPU µs each accounted process (nats-server, the bench) spent per windowed acked publish; null
   * when not measured. With `cpu_us_per_publish_total`, a unit to state a hop's CPU in that does
   * not change with the machine's speed.
   */
  cpu_us_per_publish: Record<string, number | null>;
  /** The sum of `cpu_us_per_publish`; null when one of them was not measured. */
  cpu_us_per_publish_total: number | null;
  /** Why a `cpu_us_per_publish` figure is null, per process. */
  cpu_not_measured: Record<string, string>;
  /** One acked publish at a time: round trip in ms. */
  js_publish_rtt: LatencySummary;
  /** Messages per second read back with an ordered consumer. */
  js_ordered_replay_per_s: number;
  /** Redis HSET commands per second, pipelined in batches. */
  redis_pipelined_writes_per_s: number;
}

export interface RawOptions {
  nats: NatsHandle;
  redis: Redis;
  /** Messages for the publish-rate and replay measurements. */
  messages: number;
  /** Sequential publishes for the round-trip distribution. */
  roundTrips: number;
  payloadBytes: number;
  window: number;
  redisWrites: number;
  redisBatch: number;
  /** CPU seconds used so far per accounted process (nats-server and the bench itself). */
  cpu?: () => Record<string, CpuReading>;
}

/**
 * Measure the raw ceilings on a throw-away file-backed stream (same storage and replica count as
 * Baton's streams) and a throw-away Redis key space; both are deleted afterwards.
 */
export async function measureRaw(opts: RawOptions): Promise<RawCeilings> {
  const tag = randomBytes(4).toString('hex');
  const stream = `BENCHRAW_${tag}`;
  const subject = `benchraw${tag}.data`;
  const { js, jsm } = opts.nats;
  await jsm.streams.add({ name: stream, subjects: [`benchraw${tag}.>`], storage: 'file' as never, num_replicas: 1 });
  try {
    const payload = randomBytes(opts.payloadBytes);
    // Warm the path (connection buffers, the stream's first block).
    for (let i = 0; i < 200; i++) await js.publish(subject, payload);

    // 1. windowed async publishes
    const cpuBefore = opts.cpu?.() ?? {};
    const started = nowMs();
    const inFlight = new Set<Promise<unknown>>();
    for (let i = 0; i < opts.messages; i++) {
      const ack = js.publish(subject, payload).finally(() => inFlight.delete(ack));
      inFlight.add(ack);
      if (inFlight.size >= opts.window) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
    const publishRate = opts.messages / ((nowMs() - started) / 1000);
    const publishCpu = cpuFigures(cpuBefore, opts.cpu?.() ?? {}, opts.messages, 1_000_000);
    const publishCpuValues = Object.values(publishCpu.values);

    // 2. one publish at a time
    const rtts: number[] = [];
    for (let i = 0; i < opts.roundTrips; i++) {
      const t0 = nowMs();
      await js.publish(subject, payload);
      rtts.push(nowMs() - t0);
    }

    // 3. ordered consumer over everything stored
    const total = (await jsm.streams.info(stream)).state.messages;
    const consumer = await js.consumers.get(stream);
    const readStart = nowMs();
    let read = 0;
    const messages = await consumer.consume({ max_messages: 1000 });
    for await (const _msg of messages) {
      read++;
      if (read >= total) break;
    }
    const replayRate = read / ((nowMs() - readStart) / 1000);
    await messages.close().catch(() => undefined);

    // 4. Redis pipelined writes
    const keyBase = `benchraw:${tag}`;
    const field = payload.subarray(0, Math.min(64, payload.length)).toString('hex');
    const redisStart = nowMs();
    for (let done = 0; done < opts.redisWrites; done += opts.redisBatch) {
      const pipeline = opts.redis.pipeline();
      for (let i = done; i < Math.min(opts.redisWrites, done + opts.redisBatch); i++) pipeline.hset(`${keyBase}:${i % 5000}`, 'f', field);
      await pipeline.exec();
    }
    const redisRate = opts.redisWrites / ((nowMs() - redisStart) / 1000);
    const keys = await opts.redis.keys(`${keyBase}:*`);
    for (let i = 0; i < keys.length; i += 1000) await opts.redis.unlink(...keys.slice(i, i + 1000));

    return {
      payload_bytes: opts.payloadBytes,
      js_publish_per_s: Math.round(publishRate),
      window: opts.window,
      cpu_us_per_publish: publishCpu.values,
      cpu_us_per_publish_total:
        publishCpuValues.length > 0 && publishCpuValues.every((v) => v !== null)
          ? Math.round((publishCpuValues as number[]).reduce((a, b) => a + b, 0) * 100) / 100
          : null,
      cpu_not_measured: publishCpu.not_measured,
      js_publish_rtt: summarize(rtts),
      js_ordered_replay_per_s: Math.round(replayRate),
      redis_pipelined_writes_per_s: Math.round(redisRate),
    };
  } finally {
    await jsm.streams.delete(stream).catch(() => undefined);
  }
}
