// Shared set-up for this library's integration tests: a real NATS connection, a random subject
// prefix per test and cleanup of every stream that prefix owns.
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { EventRegistry, type EventAttribution } from '@baton/contracts';
import { connectNats, type NatsHandle } from '../connection';
import { batonStreamNames, batonTopology } from '../topology';
import { provision } from '../provision';
import type { AggregateRef, StoredEvent } from '../store';

export const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';

export function randomPrefix(): string {
  return `t${randomBytes(5).toString('hex')}`;
}

export async function connectTest(name = 'eventstore-int'): Promise<NatsHandle> {
  return connectNats({ servers: NATS_URL, name, reconnect: false });
}

/** Provision Baton's three streams for `prefix` (memory storage keeps tests fast). */
export async function provisionTopology(handle: NatsHandle, prefix: string): Promise<void> {
  await provision(handle.jsm, batonTopology(prefix, { storage: 'memory' }));
}

/** Delete every stream of `prefix`; ignores ones that do not exist. */
export async function deleteTopology(handle: NatsHandle, prefix: string): Promise<void> {
  const names = batonStreamNames(prefix);
  for (const name of [names.events, names.inbox, names.dlq]) {
    await handle.jsm.streams.delete(name).catch(() => undefined);
  }
}

export const CounterAddedSchema = z.object({ n: z.number().int(), total: z.number().int(), version: z.number().int() });
export const CounterRefusedSchema = z.object({ reason: z.string() });

/** A tiny counter aggregate (kind `handoff`, type `counter.added`) for store tests. */
export function counterRegistry(): EventRegistry {
  return new EventRegistry().register({ type: 'counter.added', aggregate: 'handoff', version: 1, schema: CounterAddedSchema });
}

export type CounterEvent = { type: 'counter.added'; data: z.infer<typeof CounterAddedSchema>; by?: EventAttribution };
export type CounterState = { total: number; version: number; history: number[] };
export type CounterCommand = { type: 'add'; n: number };

export const counterDecider = {
  initialState: (): CounterState => ({ total: 0, version: 0, history: [] }),
  evolve: (state: CounterState, event: CounterEvent): CounterState => ({
    total: event.data.total,
    version: event.data.version,
    history: [...state.history, event.data.n],
  }),
  decide: (command: CounterCommand, state: CounterState) =>
    command.n < 0
      ? ({ ok: false, error: { code: 'negative', kind: 'invalid', message: 'cannot add a negative number' } } as const)
      : ({
          ok: true,
          events: [{ type: 'counter.added', data: { n: command.n, total: state.total + command.n, version: state.version + 1 } }],
        } as { ok: true; events: CounterEvent[] }),
};

export const meta = (actor = 'tester') => ({
  occurredAt: '2025-01-01T00:00:00.000Z',
  actor,
  origin: 'agent' as const,
  causationId: null,
  correlationId: 'corr-1',
});

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A publisher that stores one message after another, each awaited, until stopped. */
export interface SteadyPublisher {
  /** Messages stored so far. */
  count(): number;
  /** Stop after the publish in flight; resolves with how many were stored. Safe to call twice. */
  stop(): Promise<number>;
}

/**
 * Publish `publish(n)` for n = 0, 1, 2… one after another, each awaited: a consumer of them is
 * never idle for long, which is what the pull-expiry tests need (nats-server 2.9 may expire a pull
 * without a word when a message is ready for it at that moment).
 */
export function steadyPublisher(publish: (n: number) => Promise<unknown>): SteadyPublisher {
  let going = true;
  let stored = 0;
  const loop = (async () => {
    while (going) {
      await publish(stored);
      stored++;
    }
  })();
  return {
    count: () => stored,
    stop: async () => {
      going = false;
      await loop;
      return stored;
    },
  };
}

/**
 * A test's own topology: before each test a fresh prefix, a connection and Baton's streams under
 * that prefix; after it, the streams deleted and the connection closed. Call inside `describe`.
 */
export function useTopology(name: string): { nats: () => NatsHandle; prefix: () => string } {
  let nats: NatsHandle | undefined;
  let prefix = '';
  beforeEach(async () => {
    prefix = randomPrefix();
    nats = await connectTest(name);
    await provisionTopology(nats, prefix);
  });
  afterEach(async () => {
    if (!nats) return;
    await deleteTopology(nats, prefix);
    await nats.close();
    nats = undefined;
  });
  return {
    nats: () => {
      if (!nats) throw new Error('the topology exists only inside a test');
      return nats;
    },
    prefix: () => prefix,
  };
}

/** The counter aggregate the store tests write (`proj`, kind `handoff`). */
export const counterRef = (id = 'agg-1'): AggregateRef => ({ project: 'proj', kind: 'handoff', id });

/** The counter's state after `events`, folded afresh (what a cached fold must equal). */
export function counterFold(events: readonly StoredEvent[]): CounterState {
  return events.reduce((state, e) => counterDecider.evolve(state, { type: e.type, data: e.payload } as CounterEvent), counterDecider.initialState());
}
