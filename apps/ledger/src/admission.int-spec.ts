import { createEventRegistry, Principals, type LedgerReply, type ProjectDefinition } from '@baton/contracts';
import { JetStreamEventStore, LedgerClient, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { LedgerCommandListener, OVERLOADED_RETRY_AFTER_MS } from './commands/command-listener';
import { bootLedger, connectTest, deleteStreams, publishDefinition, randomPrefix } from './int/support';

// A ledger instance works on at most LEDGER_MAX_INFLIGHT requests at once; one more is answered
// `overloaded` at once, with nothing done, instead of waiting in memory (under a store that slows
// down, callers time out and send again, and an unbounded backlog outgrew the heap). The callers'
// client sends the same command again after the wait the refusal names.

const P = 'admission';
const MAX = 2;
const BURST = 60;
const definition: ProjectDefinition = { project: P, agents: [{ name: 'alice' }, { name: 'bob' }], workflows: [], meshes: [] } as unknown as ProjectDefinition;

describe('ledger admission: a bounded number of requests in flight, the rest answered overloaded (real NATS)', () => {
  const prefix = randomPrefix();
  let nats: NatsHandle;
  let ledger: RunningService;

  beforeAll(async () => {
    nats = await connectTest();
    ledger = await bootLedger(prefix, 'ledger-admission', { LEDGER_MAX_INFLIGHT: String(MAX) });
    await publishDefinition(nats, prefix, definition);
  });

  afterAll(async () => {
    await ledger?.stop();
    if (nats) {
      await deleteStreams(nats, prefix);
      await nats.close();
    }
  });

  const create = (client: LedgerClient, id: string) =>
    client.create(P, { handoff_id: id, from_agent: 'alice', to_agent: 'bob', summary: `work ${id}`, max_retries: 3, idempotency_key: `create-${id}` });

  it('a burst past the bound: the excess is answered overloaded (kind unavailable, retry_after_ms) and stores nothing; sent again, every command is applied once', async () => {
    const once = new LedgerClient(nats, prefix, { as: Principals.agent(P, 'alice'), timeoutMs: 10_000, attempts: 1 });
    const ids = Array.from({ length: BURST }, (_, i) => `adm-${i}`);
    const replies: LedgerReply[] = await Promise.all(ids.map((id) => create(once, id)));
    const shed = replies.flatMap((r, i) => (!r.ok && r.error.code === 'overloaded' ? [{ id: ids[i]!, error: r.error }] : []));
    const applied = replies.flatMap((r, i) => (r.ok ? [ids[i]!] : []));
    // Every reply is one of the two: nothing else went wrong.
    expect(shed.length + applied.length).toBe(BURST);
    expect(shed.length).toBeGreaterThan(0);
    expect(applied.length).toBeGreaterThan(0);
    expect(shed[0]!.error).toMatchObject({ kind: 'unavailable', details: { retry_after_ms: OVERLOADED_RETRY_AFTER_MS, max_inflight: MAX } });
    expect(ledger.app.get(LedgerCommandListener).shedCount()).toBe(shed.length);

    // A shed command stored nothing: its handoff has no events.
    const store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    for (const { id } of shed.slice(0, 5)) expect((await store.read({ project: P, kind: 'handoff', id })).events).toEqual([]);

    // The client retries a refused command with the same key after the wait it names: all applied,
    // the ones applied in the burst answered as retries (no second creation).
    const retrying = new LedgerClient(nats, prefix, { as: Principals.agent(P, 'alice'), timeoutMs: 10_000, attempts: 20 });
    const again = await Promise.all(ids.map((id) => create(retrying, id)));
    expect(again.filter((r) => !r.ok)).toEqual([]);
    for (const id of ids) {
      const { events } = await store.read({ project: P, kind: 'handoff', id });
      expect(events.filter((e) => e.type === 'handoff.created')).toHaveLength(1);
    }
  }, 60_000);
});
