import { randomBytes } from 'node:crypto';
import { headers as natsHeaders } from 'nats';
import { LedgerClient, batonStreamNames, watchdogSnapshotStream, type NatsHandle } from '@baton/eventstore';
import { Principals } from '@baton/contracts';
import { waitFor } from '@baton/wait';
import { PROJECT, route, startHarness, stopRequestsSoon, type Harness, type TestWatchdog } from '../int/support';
import { SnapshotStore } from './snapshot-store';
import { WatchdogSnapshots, type SnapshotStatus } from './watchdog-snapshots';
import { DefaultGuardConfig } from '@baton/domain';
import { JsonLogger } from '@baton/platform';
import { DeadlineTable } from '../deadlines/deadline-table';
import { GuardBook } from '../guards/guard-book';

/*
 * The watchdog's snapshots on a real NATS server: the store (chunks, head, the race of two saves,
 * what is not loaded) and a restarted watchdog that restores its folds from one and reads only the
 * events after it.
 */

let h: Harness;

beforeEach(async () => {
  h = await startHarness();
});

afterEach(async () => {
  await h.cleanup();
});

const alice = Principals.agent(PROJECT, 'alice');
const bob = Principals.agent(PROJECT, 'bob');

/** What the events stream of the harness is: the history a snapshot must belong to. */
async function eventsStream(): Promise<{ eventsStream: string; eventsCreated: string; lastSeq: number }> {
  const name = batonStreamNames(h.prefix).events;
  const info = await h.nats.jsm.streams.info(name);
  return { eventsStream: name, eventsCreated: info.created, lastSeq: info.state.last_seq };
}

/** A document that gzip cannot shrink much: `kb` KiB of random base64. */
const bulky = (kb: number) => ({ filler: randomBytes(kb * 768).toString('base64'), marker: randomBytes(4).toString('hex') });

async function snapshotMessages(): Promise<number> {
  return (await h.nats.jsm.streams.info(watchdogSnapshotStream(h.prefix).name)).state.messages;
}

describe('SnapshotStore (real NATS)', () => {
  it('saves a document as chunks and a head, loads it back whole, and keeps only the last snapshot', async () => {
    const store = new SnapshotStore(h.nats, h.prefix, 1);
    const stream = await eventsStream();
    const position = { fingerprint: 'f1', eventsStream: stream.eventsStream, eventsCreated: stream.eventsCreated, throughSeq: 0 };
    const first = bulky(900);
    const saved = await store.save(JSON.stringify(first), position, 'wd-a');
    expect(saved.saved && saved.head.chunks.length).toBeGreaterThanOrEqual(3);
    const loaded = await store.load({ ...stream, fingerprint: 'f1' });
    expect(loaded).toMatchObject({ ok: true, document: first, head: { by: 'wd-a', through_seq: 0 } });

    const second = bulky(300);
    const again = await store.save(JSON.stringify(second), position, 'wd-b');
    expect(again.saved).toBe(true);
    expect(await store.load({ ...stream, fingerprint: 'f1' })).toMatchObject({ ok: true, document: second });
    // The head and the second snapshot's chunks; the first's were purged.
    expect(await snapshotMessages()).toBe(1 + (again.saved ? again.head.chunks.length : 0));
  });

  it('two saves racing: the one whose head lands second is superseded and purges its chunks; the other stands', async () => {
    const stream = await eventsStream();
    const position = { fingerprint: 'f1', eventsStream: stream.eventsStream, eventsCreated: stream.eventsCreated, throughSeq: 0 };
    const winner = new SnapshotStore(h.nats, h.prefix, 1);
    const winning = bulky(10);
    // The loser's first chunk publish lets the winner save whole first (after the loser read the head).
    let raced = false;
    const js = new Proxy(h.nats.js, {
      get(target, key, receiver) {
        if (key !== 'publish') return Reflect.get(target, key, receiver) as unknown;
        return async (...args: Parameters<NatsHandle['js']['publish']>) => {
          if (!raced) {
            raced = true;
            expect(await winner.save(JSON.stringify(winning), position, 'wd-winner')).toMatchObject({ saved: true });
          }
          return target.publish(...args);
        };
      },
    });
    const loser = new SnapshotStore({ js, jsm: h.nats.jsm }, h.prefix, 1);
    await expect(loser.save(JSON.stringify(bulky(10)), position, 'wd-loser')).resolves.toEqual({ saved: false, reason: 'superseded' });
    const loaded = await winner.load({ ...stream, fingerprint: 'f1' });
    expect(loaded).toMatchObject({ ok: true, document: winning, head: { by: 'wd-winner' } });
    expect(await snapshotMessages()).toBe(1 + (loaded.ok ? loaded.head.chunks.length : 0));
  });

  it('loads nothing from another build or settings, another events stream, past the stream, or with a chunk gone (and says which)', async () => {
    const store = new SnapshotStore(h.nats, h.prefix, 1);
    const stream = await eventsStream();
    expect(await store.load({ ...stream, fingerprint: 'f1' })).toMatchObject({ ok: false, miss: 'none' });
    const saved = await store.save(
      JSON.stringify(bulky(400)),
      { fingerprint: 'f1', eventsStream: stream.eventsStream, eventsCreated: stream.eventsCreated, throughSeq: 0 },
      'wd-a',
    );
    expect(await store.load({ ...stream, fingerprint: 'f2' })).toMatchObject({ ok: false, miss: 'other_build' });
    expect(await store.load({ ...stream, eventsCreated: '2020-01-01T00:00:00Z', fingerprint: 'f1' })).toMatchObject({ ok: false, miss: 'other_stream' });
    await store.save(
      JSON.stringify({}),
      { fingerprint: 'f1', eventsStream: stream.eventsStream, eventsCreated: stream.eventsCreated, throughSeq: stream.lastSeq + 5 },
      'wd-a',
    );
    expect(await store.load({ ...stream, fingerprint: 'f1' })).toMatchObject({ ok: false, miss: 'ahead_of_stream' });
    // A snapshot one of whose chunks is gone.
    const third = await store.save(
      JSON.stringify(bulky(400)),
      { fingerprint: 'f1', eventsStream: stream.eventsStream, eventsCreated: stream.eventsCreated, throughSeq: 0 },
      'wd-a',
    );
    if (!saved.saved || !third.saved) throw new Error('not saved');
    await h.nats.jsm.streams.deleteMessage(watchdogSnapshotStream(h.prefix).name, third.head.chunks[1] as number);
    expect(await store.load({ ...stream, fingerprint: 'f1' })).toMatchObject({ ok: false, miss: 'unreadable' });
  });
});

describe('WatchdogSnapshots.saveNow (real NATS)', () => {
  it('saves nothing while a stop is owed (it would be lost by a restart from the snapshot), nor twice through the same sequence', async () => {
    let idle = false;
    let position = 7;
    const book = new GuardBook(DefaultGuardConfig);
    const snapshots = new WatchdogSnapshots({
      store: new SnapshotStore(h.nats, h.prefix, 1),
      jsm: h.nats.jsm,
      eventsStream: batonStreamNames(h.prefix).events,
      guardConfig: DefaultGuardConfig,
      intervalMs: 60_000,
      instance: 'wd-test',
      logger: new JsonLogger('watchdog', 'error'),
      parts: {
        book,
        runner: { idle: () => idle },
        leases: new DeadlineTable(),
        deadlines: { save: () => ({ known: [], table: [] }), restore: () => undefined },
        position: () => position,
      },
    });
    expect(await snapshots.saveNow()).toBe(false);
    expect(snapshots.status()).toMatchObject({ put_off: 1, saves: 0 });
    await expect(h.nats.jsm.streams.info(watchdogSnapshotStream(h.prefix).name)).rejects.toThrow();
    idle = true;
    expect(await snapshots.saveNow()).toBe(true);
    expect(await snapshots.saveNow()).toBe(false);
    position = 9;
    expect(await snapshots.saveNow()).toBe(true);
    expect(snapshots.status()).toMatchObject({ put_off: 1, saves: 2, last_saved_through_seq: 9 });
  });
});

describe('a watchdog restarted from its snapshot (real NATS)', () => {
  const client = () => new LedgerClient(h.nats, h.prefix, { as: bob, attempts: 1 });

  async function createAndClaim(id: string, leaseMs: number): Promise<string> {
    const created = await client().create(
      PROJECT,
      { handoff_id: id, from_agent: 'alice', to_agent: 'bob', summary: 'write the parser', max_retries: 3, idempotency_key: `create-${id}` },
      { as: alice },
    );
    if (!created.ok) throw new Error(`create refused: ${JSON.stringify(created.error)}`);
    const claimed = await client().claim(PROJECT, { handoff_id: id, lease_ms: leaseMs, idempotency_key: `claim-${id}` });
    if (!claimed.ok || !claimed.handoff.claim_id) throw new Error(`claim refused: ${JSON.stringify(claimed)}`);
    return claimed.handoff.claim_id;
  }

  /** A run event that does not decode: each watchdog that reads it counts it once (`events_rejected`). */
  async function undecodableEvent(): Promise<void> {
    const hdrs = natsHeaders();
    hdrs.set('Baton-Event-Type', 'run.routed');
    await h.nats.js.publish(`${h.prefix}.ev.${PROJECT}.run.run-bad`, new TextEncoder().encode('{"type":"run.routed","payload":'), { headers: hdrs });
  }

  type Status = {
    caught_up: boolean;
    guards: { events_rejected: number; runs: number; caught_up: boolean };
    stream: { read_seq: number };
    snapshots: SnapshotStatus;
  };
  const statusOf = async (watchdog: TestWatchdog): Promise<Status> =>
    (await (await fetch(`${await watchdog.service.app.getUrl()}/watchdog/status`)).json()) as Status;

  /** Start a watchdog, let it read what is there and save a snapshot of it, stop it; returns how far it saved. */
  async function firstWatchdog(env: Record<string, string>): Promise<number> {
    const first = await h.startWatchdog('wd-first', env);
    const { lastSeq } = await eventsStream();
    const saved = await waitFor(
      async () => {
        const status = await statusOf(first);
        return status.snapshots.last_saved_through_seq >= lastSeq ? status : undefined;
      },
      'a snapshot of everything stored',
      { timeoutMs: 8000 },
    );
    expect(saved.guards.events_rejected).toBe(1);
    await first.stop();
    return saved.snapshots.last_saved_through_seq;
  }

  it("restores the guard book and the lease table and reads only what came after: the run's earlier hops count, the lease is requeued, the event before it is not read again", async () => {
    const env = { WATCHDOG_SNAPSHOT_INTERVAL_MS: '200', WATCHDOG_MAX_HOPS: '3' };
    await route(h, 'run-snap', ['a', 'b', 'c']);
    const claimId = await createAndClaim('h-snap', 4_000);
    await undecodableEvent();
    const through = await firstWatchdog(env);

    const second = await h.startWatchdog('wd-second', env);
    const status = await waitFor(async () => {
      const s = await statusOf(second);
      return s.caught_up && s.guards.caught_up ? s : undefined;
    }, 'the second watchdog to catch up');
    expect(status.snapshots).toMatchObject({ enabled: true, restored_through_seq: through, restore_miss: null });
    expect(status.stream.read_seq).toBeGreaterThanOrEqual(through);
    // The book came back (the run is tracked), and the undecodable event was not read a second time.
    expect(status.guards).toMatchObject({ runs: 1, events_rejected: 0 });

    // The run's fourth hop is over its budget of 3: the three before the snapshot were counted.
    await route(h, 'run-snap', ['d'], 4);
    const stops = await stopRequestsSoon(h, 'the budget stop', { timeoutMs: 8000 });
    expect(stops[0]).toMatchObject({ workflow_run_id: 'run-snap', why: 'budget', cap: { name: 'hops', limit: 3, used: 4 } });
    // The lease claimed before the snapshot is requeued by the watchdog that restored it.
    await waitFor(async () => ((await h.state('h-snap')).status === 'pending' ? true : undefined), 'the lease requeued', { timeoutMs: 10_000 });
    expect(second.outcomes.some((o) => o.kind === 'requeued' && o.deadline.claimId === claimId)).toBe(true);
  }, 30_000);

  it('other guard settings fold the same events differently: the snapshot is passed over and the whole stream read', async () => {
    await route(h, 'run-other', ['a', 'b']);
    await undecodableEvent();
    await firstWatchdog({ WATCHDOG_SNAPSHOT_INTERVAL_MS: '200', WATCHDOG_MAX_HOPS: '3' });
    const second = await h.startWatchdog('wd-second', { WATCHDOG_SNAPSHOT_INTERVAL_MS: '200', WATCHDOG_MAX_HOPS: '5' });
    const status = await waitFor(async () => {
      const s = await statusOf(second);
      return s.guards.caught_up ? s : undefined;
    }, 'the second watchdog to catch up');
    expect(status.snapshots).toMatchObject({ restored_through_seq: 0, restore_miss: 'other_build' });
    expect(status.guards.events_rejected).toBe(1);
  }, 20_000);

  it('WATCHDOG_SNAPSHOT_INTERVAL_MS=0: nothing saved, nothing restored, no snapshot stream', async () => {
    await route(h, 'run-off', ['a']);
    const watchdog = await h.startWatchdog('wd-off', { WATCHDOG_SNAPSHOT_INTERVAL_MS: '0' });
    const status = await waitFor(async () => {
      const s = await statusOf(watchdog);
      return s.guards.caught_up ? s : undefined;
    }, 'the watchdog to catch up');
    expect(status.snapshots).toMatchObject({ enabled: false, saves: 0, restored_through_seq: 0 });
    await expect(h.nats.jsm.streams.info(watchdogSnapshotStream(h.prefix).name)).rejects.toThrow();
  });
});
