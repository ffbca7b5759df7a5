import type Redis from 'ioredis';
import { createEventRegistry } from '@baton/contracts';
import { batonStreamNames, type NatsHandle } from '@baton/eventstore';
import { batonProjections, createBatonProjector, createProjectionStore, jetStreamReplaySource } from '@baton/projections';
import { nowMs, round } from './stats';

export interface ReplayResult {
  /** Events in the stream when the rebuild started. */
  events: number;
  projections: number;
  seconds: number;
  /** Stream events per second, every projection rebuilt (what `baton replay` does). */
  events_per_s: number;
}

/**
 * Rebuild every Baton projection from the events stream the way `baton replay` does (shadow
 * generation, atomic swap, while the notifier keeps applying live events) and time it.
 */
export async function measureReplay(nats: NatsHandle, redis: Redis, prefix: string): Promise<ReplayResult> {
  const store = createProjectionStore({ redis, prefix: `${prefix}:proj` });
  const projector = createBatonProjector({ store });
  const source = jetStreamReplaySource({ nats, prefix, registry: createEventRegistry() });
  const events = (await nats.jsm.streams.info(batonStreamNames(prefix).events)).state.messages;
  const names = batonProjections().map((p) => p.name);
  const started = nowMs();
  const results = [];
  for (const name of names) results.push(await projector.rebuild(name, source));
  const seconds = (nowMs() - started) / 1000;
  for (const result of results) {
    if (result.status === 'swapped') await result.cleanup;
  }
  return { events, projections: names.length, seconds: round(seconds, 2), events_per_s: Math.round(events / seconds) };
}
