import type Redis from 'ioredis';
import { createEventRegistry } from '@baton/contracts';
import { batonStreamNames, type NatsHandle } from '@baton/eventstore';
import { batonProjections, createBatonProjector, createProjectionStore, jetStreamReplaySource } from '@baton/projections';
import { cpuFigures, type CpuReading } from './platform';
import { nowMs, round } from './stats';

export interface ReplayResult {
  /** Events in the stream when the rebuild started. */
  events: number;
  projections: number;
  seconds: number;
  /** Stream events per second, every projection rebuilt (what `baton replay` does). */
  events_per_s: number;
  /** CPU microseconds per stream event spent by each accounted process during the rebuild; null when not measured. */
  cpu_us_per_event: Record<string, number | null>;
  /** Why a `cpu_us_per_event` figure is null, per process. */
  cpu_not_measured: Record<string, string>;
}

/**
 * Rebuild every Baton projection from the events stream (each into a shadow generation swapped in
 * atomically, while the notifier keeps applying live events; all five at once, `rebuildAll`) and
 * time it.
 */
export async function measureReplay(nats: NatsHandle, redis: Redis, prefix: string, cpu?: () => Record<string, CpuReading>): Promise<ReplayResult> {
  const store = createProjectionStore({ redis, prefix: `${prefix}:proj` });
  const projector = createBatonProjector({ store });
  const source = jetStreamReplaySource({ nats, prefix, registry: createEventRegistry() });
  const events = (await nats.jsm.streams.info(batonStreamNames(prefix).events)).state.messages;
  const names = batonProjections().map((p) => p.name);
  const cpuBefore = cpu?.() ?? {};
  const started = nowMs();
  const results = await projector.rebuildAll(source);
  const seconds = (nowMs() - started) / 1000;
  const cpuAfter = cpu?.() ?? {};
  const cpuPerEvent = cpuFigures(cpuBefore, cpuAfter, events, 1e6, 1);
  for (const result of Object.values(results)) {
    if (result.status === 'swapped') await result.cleanup;
  }
  return {
    events,
    projections: names.length,
    seconds: round(seconds, 2),
    events_per_s: Math.round(events / seconds),
    cpu_us_per_event: cpuPerEvent.values,
    cpu_not_measured: cpuPerEvent.not_measured,
  };
}
