import type { CompletionReport, HandoffRecord, LedgerReply } from '@baton/contracts';
import { batonStreamNames, JetStreamEventStore, LedgerClient, type NatsHandle } from '@baton/eventstore';
import { MetricName, metricSample, type RunningService } from '@baton/platform';
import { createEventRegistry } from '@baton/contracts';
import { waitFor } from '@baton/wait';
import { LedgerCommandListener } from './commands/command-listener';
import { agentsOf, bootLedger, callers, connectTest, deadLetters, deleteStreams, DlqHeader, offers, publishDefinition, randomPrefix } from './int/support';
import { LEDGER_FOLD_CACHE_MB, LEDGER_FOLD_CACHE_SIZE } from './ledger';

const P = 'shop';
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const as = agentsOf(P);
const LEASE_MS = 30_000;

const report: CompletionReport = {
  summary: 'implemented the parser',
  files_changed: ['src/parser.ts'],
  verification: 'npm test',
  next_steps: '',
  outcome: 'completed',
  evidence: { tests_run: ['parser.spec.ts: 12 passed'] },
};

function handoffOf(reply: LedgerReply): HandoffRecord {
  if (!reply.ok) throw new Error(`expected ok, got ${reply.error.code}: ${reply.error.message}`);
  return reply.handoff;
}

function errorOf(reply: LedgerReply) {
  if (reply.ok) throw new Error(`expected an error, got ${reply.handoff.status}`);
  return reply.error;
}

describe('ledger service (real NATS, two instances on one prefix)', () => {
  const prefix = randomPrefix();
  let nats: NatsHandle;
  let ledgerA: RunningService;
  let ledgerB: RunningService;
  let client: LedgerClient;
  let store: JetStreamEventStore;

  const eventCount = async (id: string) => (await store.read({ project: P, kind: 'handoff', id })).events.length;

  beforeAll(async () => {
    nats = await connectTest();
    [ledgerA, ledgerB] = await Promise.all([
      bootLedger(prefix, 'ledger-a', { LEDGER_LEASE_MS: String(LEASE_MS) }),
      bootLedger(prefix, 'ledger-b', { LEDGER_LEASE_MS: String(LEASE_MS) }),
    ]);
    await publishDefinition(nats, prefix, {
      project: P,
      lead: 'lena',
      agents: [{ name: 'alice' }, { name: 'bob', role: 'dev' }, { name: 'lena' }],
      workflows: [],
    });
    client = new LedgerClient(nats, prefix, { timeoutMs: 5000 });
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
  });

  afterAll(async () => {
    await Promise.all([ledgerA?.stop(), ledgerB?.stop()]);
    if (nats) {
      await deleteStreams(nats, prefix);
      await nats.close();
    }
  });

  async function createAndReturn(id: string, maxRetries = 3): Promise<HandoffRecord> {
    handoffOf(
      await client.create(
        P,
        { handoff_id: id, from_agent: 'alice', to_agent: 'bob', summary: `work ${id}`, max_retries: maxRetries, idempotency_key: `create-${id}` },
        as('alice'),
      ),
    );
    const claimed = handoffOf(await client.claim(P, { handoff_id: id, idempotency_key: `claim-${id}` }, as('bob')));
    return handoffOf(await client.return(P, { handoff_id: id, claim_id: claimed.claim_id!, report, idempotency_key: `return-${id}` }, as('bob')));
  }

  it('keeps 5 000 folded handoffs weighing at most 16 MiB unless BATON_FOLD_CACHE_SIZE / _MB say otherwise (its heap is sized for that)', async () => {
    expect(ledgerA.runtime.store.cacheCapacity).toBe(LEDGER_FOLD_CACHE_SIZE);
    expect(LEDGER_FOLD_CACHE_SIZE).toBe(5_000);
    expect(ledgerA.runtime.store.foldCache().maxBytes).toBe(LEDGER_FOLD_CACHE_MB * 1024 * 1024);
    expect(LEDGER_FOLD_CACHE_MB).toBe(16);
    const sized = await bootLedger(prefix, 'ledger-sized', { BATON_FOLD_CACHE_SIZE: '1234', BATON_FOLD_CACHE_MB: '3' });
    try {
      expect(sized.runtime.store.foldCache()).toMatchObject({ capacity: 1234, maxBytes: 3 * 1024 * 1024 });
    } finally {
      await sized.stop();
    }
  });

  it("a run's variables as deep as the inbox lets them be fit in the router's create: a service's command may nest 4 levels deeper than an inbox message; an agent's may not", async () => {
    // A value 62 levels deep: 64 in a start's `variables` (body, variables, value…), 66 in a create's context.
    const deep = (levels: number): unknown => (levels === 0 ? 'leaf' : { k: deep(levels - 1) });
    const body = (id: string) => ({
      handoff_id: id,
      from_agent: 'alice',
      // Not bob: the cycle test below reads bob's first offer.
      to_agent: 'lena',
      summary: 'deep variables',
      context: { variables: { deep: deep(62) } },
      idempotency_key: `create-${id}`,
    });
    expect(await client.create(P, body('h-deep-router'), callers.router)).toMatchObject({ ok: true });
    expect(await client.create(P, body('h-deep-agent'), as('alice'))).toMatchObject({
      ok: false,
      error: { code: 'schema_violation', message: expect.stringContaining('levels deep; the cap is 64') },
    });
    // The service's allowance has its own cap.
    const deeper = { ...body('h-deeper-router'), context: { variables: { deep: deep(70) } } };
    expect(await client.create(P, deeper, callers.router)).toMatchObject({
      ok: false,
      error: { code: 'schema_violation', message: expect.stringContaining('the cap is 68') },
    });
  });

  it('seed 002 cycle: create → claim → heartbeat → return → handback created for the delegator → accept → parent completed', async () => {
    const created = handoffOf(
      await client.create(
        P,
        { handoff_id: 'h-cycle', from_agent: 'alice', to_agent: 'bob', summary: 'write the parser', idempotency_key: 'create-cycle' },
        as('alice'),
      ),
    );
    expect(created).toMatchObject({ id: 'h-cycle', status: 'pending', kind: 'task', from_agent: 'alice', to_agent: 'bob' });

    // The handoff is offered to its addressee (HandoffRecord JSON, msg id offer:<id>:<seq>).
    const [offer] = await waitFor(
      async () => {
        const list = await offers(nats, prefix, P, 'bob');
        return list.some((m) => (m.json() as HandoffRecord).id === 'h-cycle') ? list : undefined;
      },
      'h-cycle offered to bob',
      { timeoutMs: 8000 },
    );
    expect(offer!.json()).toMatchObject({ id: 'h-cycle', status: 'pending', to_agent: 'bob' });

    const before = Date.now();
    const claimed = handoffOf(await client.claim(P, { handoff_id: 'h-cycle', idempotency_key: 'claim-cycle' }, as('bob')));
    expect(claimed).toMatchObject({ status: 'claimed', claimed_by: 'bob' });
    expect(claimed.claim_id).toMatch(/^claim-/);
    // The lease defaults to LEDGER_LEASE_MS.
    const lease = Date.parse(claimed.lease_expires_at!) - before;
    expect(lease).toBeGreaterThan(LEASE_MS - 2000);
    expect(lease).toBeLessThan(LEASE_MS + 2000);

    const beaten = handoffOf(
      await client.heartbeat(P, { handoff_id: 'h-cycle', claim_id: claimed.claim_id!, lease_ms: 120_000, idempotency_key: 'hb-1' }, as('bob')),
    );
    expect(Date.parse(beaten.lease_expires_at!)).toBeGreaterThan(Date.parse(claimed.lease_expires_at!));

    const returned = handoffOf(
      await client.return(P, { handoff_id: 'h-cycle', claim_id: claimed.claim_id!, report, idempotency_key: 'return-cycle' }, as('bob')),
    );
    expect(returned).toMatchObject({ status: 'returned', handback_recipient: { to_agent: 'alice', reason: 'delegator' } });
    const handbackId = returned.handback_id!;

    // The reactor creates the completion handback for the delegator and offers it to her.
    const handback = await waitFor(() => client.get(P, handbackId), `the handback ${handbackId}`, { timeoutMs: 8000 });
    expect(handback).toMatchObject({
      kind: 'completion_handback',
      status: 'pending',
      to_agent: 'alice',
      reply_to_handoff_id: 'h-cycle',
      reviewed_worker: 'bob',
    });
    await waitFor(
      async () => (await offers(nats, prefix, P, 'alice')).some((m) => (m.json() as HandoffRecord).id === handbackId),
      `${handbackId} offered to alice`,
      { timeoutMs: 8000 },
    );

    // The parent stays returned until the handback is decided.
    expect((await client.get(P, 'h-cycle'))!.status).toBe('returned');
    const accepted = handoffOf(await client.decideHandback(P, { handoff_id: handbackId, decision: 'accept', idempotency_key: 'accept-cycle' }, as('alice')));
    expect(accepted.status).toBe('completed');

    const parent = await waitFor(
      async () => {
        const h = await client.get(P, 'h-cycle');
        return h?.status === 'completed' ? h : undefined;
      },
      'h-cycle completed',
      { timeoutMs: 8000 },
    );
    expect(parent).toMatchObject({ status: 'completed', completion_report: { outcome: 'completed' } });
  });

  it('decision=rework → parent pending with retry_count + 1, offered to the worker again and claimable', async () => {
    const returned = await createAndReturn('h-rework');
    const handbackId = returned.handback_id!;
    await waitFor(() => client.get(P, handbackId), `the handback ${handbackId}`, { timeoutMs: 8000 });
    const reworked = handoffOf(
      await client.decideHandback(
        P,
        { handoff_id: handbackId, decision: 'rework', note: 'add tests for the error paths', idempotency_key: 'rework-1' },
        as('alice'),
      ),
    );
    expect(reworked.status).toBe('completed');

    const parent = await waitFor(
      async () => {
        const h = await client.get(P, 'h-rework');
        return h?.status === 'pending' ? h : undefined;
      },
      'h-rework pending again',
      { timeoutMs: 8000 },
    );
    expect(parent).toMatchObject({ status: 'pending', retry: { max_retries: 3, retry_count: 1 } });
    expect(parent).not.toHaveProperty('claim_id');
    // Pending again for bob: offered to him again (the record as of the rework).
    const offered = (m: { json(): unknown }) => m.json() as HandoffRecord;
    await waitFor(
      async () => (await offers(nats, prefix, P, 'bob')).some((m) => offered(m).id === 'h-rework' && offered(m).retry.retry_count === 1),
      'h-rework offered to bob again',
      { timeoutMs: 8000 },
    );
    handoffOf(await client.claim(P, { handoff_id: 'h-rework', idempotency_key: 'claim-h-rework-2' }, as('bob')));
  });

  it('a handback its reviewer releases reopens the review: a new handback for the same report and reviewer is created and offered, and accepting it completes the parent', async () => {
    const returned = await createAndReturn('h-reopen');
    const first = returned.handback_id!;
    await waitFor(() => client.get(P, first), `the handback ${first}`, { timeoutMs: 8000 });
    const claimed = handoffOf(await client.claim(P, { handoff_id: first, idempotency_key: 'claim-review-1' }, as('alice')));
    handoffOf(
      await client.release(P, { handoff_id: first, claim_id: claimed.claim_id!, reason: 'out today', idempotency_key: 'release-review-1' }, as('alice')),
    );
    const parent = await waitFor(
      async () => {
        const h = await client.get(P, 'h-reopen');
        return h?.handback_id !== undefined && h.handback_id !== first ? h : undefined;
      },
      'h-reopen with a reopened review',
      { timeoutMs: 8000 },
    );
    expect(parent.status).toBe('returned');
    const second = parent.handback_id!;
    expect(second).toMatch(/^hb-[0-9a-f]{32}$/);
    const reopened = await waitFor(() => client.get(P, second), `the reopened handback ${second}`, { timeoutMs: 8000 });
    expect(reopened).toMatchObject({
      kind: 'completion_handback',
      status: 'pending',
      to_agent: 'alice',
      reviewed_worker: 'bob',
      reply_to_handoff_id: 'h-reopen',
    });
    const offered = (m: { json(): unknown }) => m.json() as HandoffRecord;
    await waitFor(async () => (await offers(nats, prefix, P, 'alice')).some((m) => offered(m).id === second), `${second} offered to alice`, {
      timeoutMs: 8000,
    });
    // The ended handback can no longer move the parent; the reopened one can.
    expect(await client.decideHandback(P, { handoff_id: first, decision: 'accept', idempotency_key: 'accept-old' }, as('alice'))).toMatchObject({ ok: false });
    handoffOf(await client.decideHandback(P, { handoff_id: second, decision: 'accept', idempotency_key: 'accept-new' }, as('alice')));
    await waitFor(async () => ((await client.get(P, 'h-reopen'))?.status === 'completed' ? true : undefined), 'h-reopen completed', { timeoutMs: 8000 });
  });

  it('optimistic claim: of 50 concurrent claims across two ledger instances exactly one wins, the rest get handoff_not_pending', async () => {
    handoffOf(
      await client.create(P, { handoff_id: 'h-race', from_agent: 'alice', summary: 'anyone may take it', idempotency_key: 'create-race' }, as('alice')),
    );
    const servedBefore = [ledgerA, ledgerB].map((l) => l.app.get(LedgerCommandListener).handledCount());

    const replies = await Promise.all(
      Array.from({ length: 50 }, (_, i) => client.claim(P, { handoff_id: 'h-race', idempotency_key: `race-${i}` }, as(`worker-${i}`))),
    );

    const winners = replies.filter((r) => r.ok);
    expect(winners).toHaveLength(1);
    const losers = replies.filter((r) => !r.ok).map((r) => errorOf(r).code);
    expect(losers).toEqual(Array(49).fill('handoff_not_pending'));
    expect(await eventCount('h-race')).toBe(2); // created + one claimed
    // Both instances served part of the race (queue group).
    const servedAfter = [ledgerA, ledgerB].map((l) => l.app.get(LedgerCommandListener).handledCount());
    expect(servedAfter[0]! - servedBefore[0]!).toBeGreaterThan(0);
    expect(servedAfter[1]! - servedBefore[1]!).toBeGreaterThan(0);
  });

  it('the same idempotency key twice → one event: a retried create or claim changes nothing and answers the same handoff', async () => {
    const create = { handoff_id: 'h-idem', from_agent: 'alice', summary: 's', idempotency_key: 'create-idem' };
    handoffOf(await client.create(P, create, as('alice')));
    expect(handoffOf(await client.create(P, create, as('alice')))).toMatchObject({ id: 'h-idem', status: 'pending', version: 1 });
    expect(await eventCount('h-idem')).toBe(1);

    const claim = { handoff_id: 'h-idem', idempotency_key: 'claim-idem' };
    const [first, second] = await Promise.all([client.claim(P, claim, as('bob')), client.claim(P, claim, as('bob'))]);
    const third = await client.claim(P, claim, as('bob'));
    const claims = [first!, second!, third].map(handoffOf);
    expect(new Set(claims.map((h) => h.claim_id)).size).toBe(1);
    expect(claims.map((h) => h.version)).toEqual([2, 2, 2]);
    expect(await eventCount('h-idem')).toBe(2);

    // Once a later command followed, the old key is recognised by the handoff itself: no event.
    handoffOf(await client.heartbeat(P, { handoff_id: 'h-idem', claim_id: claims[0]!.claim_id!, idempotency_key: 'hb-idem' }, as('bob')));
    expect(await client.claim(P, claim, as('bob'))).toMatchObject({ ok: true, events: 0, handoff: { version: 3 } });
    expect(await eventCount('h-idem')).toBe(3);
  });

  it('the same key with another body is refused idempotency_key_reused and stores nothing, at the tail or later; the same body in any key order is a retry', async () => {
    const create = { handoff_id: 'h-reuse', from_agent: 'alice', summary: 'first', idempotency_key: 'create-reuse' };
    handoffOf(await client.create(P, create, as('alice')));
    expect(errorOf(await client.create(P, { ...create, summary: 'second' }, as('alice')))).toMatchObject({
      code: 'idempotency_key_reused',
      kind: 'wrong_state',
      details: { handoff_id: 'h-reuse', idempotency_key: 'create-reuse', command: 'create' },
    });
    const [created] = (await store.read({ project: P, kind: 'handoff', id: 'h-reuse' })).events;
    expect((created?.payload as { command_digest?: string }).command_digest).toMatch(/^[0-9a-f]{32}$/);
    expect((created?.payload as { summary: string }).summary).toBe('first');

    // Right after the claim its events are the aggregate's tail: the other body must not meet them as its own.
    const claimed = handoffOf(await client.claim(P, { handoff_id: 'h-reuse', lease_ms: 60_000, idempotency_key: 'claim-reuse' }, as('bob')));
    expect(errorOf(await client.claim(P, { handoff_id: 'h-reuse', lease_ms: 90_000, idempotency_key: 'claim-reuse' }, as('bob')))).toMatchObject({
      code: 'idempotency_key_reused',
    });
    expect(await client.claim(P, { idempotency_key: 'claim-reuse', lease_ms: 60_000, handoff_id: 'h-reuse' }, as('bob'))).toMatchObject({
      ok: true,
      events: 0,
      handoff: { claim_id: claimed.claim_id, lease_expires_at: claimed.lease_expires_at },
    });
    expect(await eventCount('h-reuse')).toBe(2);

    // Later, with other events after it, the handoff's remembered keys tell the bodies apart.
    handoffOf(await client.heartbeat(P, { handoff_id: 'h-reuse', claim_id: claimed.claim_id!, idempotency_key: 'hb-reuse' }, as('bob')));
    expect(errorOf(await client.claim(P, { handoff_id: 'h-reuse', lease_ms: 90_000, idempotency_key: 'claim-reuse' }, as('bob')))).toMatchObject({
      code: 'idempotency_key_reused',
    });
    expect(await client.claim(P, { handoff_id: 'h-reuse', lease_ms: 60_000, idempotency_key: 'claim-reuse' }, as('bob'))).toMatchObject({
      ok: true,
      events: 0,
    });
    expect(await eventCount('h-reuse')).toBe(3);
  });

  it('a command in the wrong state is refused with a typed error and changes nothing', async () => {
    handoffOf(await client.create(P, { handoff_id: 'h-state', from_agent: 'alice', summary: 's', idempotency_key: 'create-state' }, as('alice')));
    expect(errorOf(await client.archive(P, { handoff_id: 'h-state', idempotency_key: 'archive-1' }, callers.operator('olga')))).toMatchObject({
      code: 'handoff_not_terminal',
      kind: 'wrong_state',
      details: { handoff_id: 'h-state', status: 'pending' },
    });
    expect(errorOf(await client.heartbeat(P, { handoff_id: 'h-state', claim_id: 'c-x', idempotency_key: 'hb-x' }, as('bob')))).toMatchObject({
      code: 'handoff_not_claimed',
      kind: 'wrong_state',
    });
    expect(errorOf(await client.claim(P, { handoff_id: 'h-missing', idempotency_key: 'k' }, as('bob')))).toMatchObject({
      code: 'not_found',
      kind: 'not_found',
    });
    expect(await eventCount('h-state')).toBe(1);
  });

  it('complete_from_result: a router-dispatched handoff closes without a handback, evidence floor applied; agents may not issue it', async () => {
    handoffOf(
      await client.create(P, { handoff_id: 'h-routed', from_agent: 'alice', to_agent: 'bob', summary: 's', idempotency_key: 'create-routed' }, as('alice')),
    );
    const body = { handoff_id: 'h-routed', result_id: 'r-1', agent: 'bob', evidence: {}, idempotency_key: 'result:r-1' };
    expect(errorOf(await client.completeFromResult(P, body, as('bob')))).toMatchObject({ code: 'principal_not_allowed', kind: 'forbidden' });
    const done = handoffOf(await client.completeFromResult(P, body, callers.router));
    expect(done).toMatchObject({
      status: 'completed',
      result_id: 'r-1',
      completion_report: { outcome: 'partial' },
      evidence_floor: { applied: true, original_outcome: 'completed', reason: 'no_evidence' },
    });
    expect(done).not.toHaveProperty('handback_id');
  });

  it("a create offers the new handoff before it answers: the offer is stored when the reply arrives, once, with the created event's sequence", async () => {
    for (const id of ['h-eager-1', 'h-eager-2', 'h-eager-3']) {
      handoffOf(await client.create(P, { handoff_id: id, from_agent: 'alice', to_agent: 'lena', summary: 's', idempotency_key: `create-${id}` }, as('alice')));
      // No wait: the create's reply comes after its offer was stored.
      const now = (await offers(nats, prefix, P, 'lena')).filter((m) => (m.json() as HandoffRecord).id === id);
      const [created] = (await store.read({ project: P, kind: 'handoff', id })).events;
      expect(now.map((m) => [m.header('Baton-Event-Seq'), m.header('Baton-Event-Type')])).toEqual([[String(created!.seq), 'handoff.created']]);
    }
    // The reactor, delivered the same events, offers none of them again.
    await sleep(500);
    const all = (await offers(nats, prefix, P, 'lena')).map((m) => (m.json() as HandoffRecord).id);
    expect(all.filter((id) => id.startsWith('h-eager-')).sort()).toEqual(['h-eager-1', 'h-eager-2', 'h-eager-3']);
  });

  it('an offer whose id another publisher took first (an agent may set any Nats-Msg-Id on its own subject) is still offered, under another id', async () => {
    // The offer's id is offer:<project>:<handoff>:<event seq>, and the event's sequence is easy to guess: take the next few.
    const last = (await nats.jsm.streams.info(batonStreamNames(prefix).events)).state.last_seq;
    for (let seq = last + 1; seq <= last + 6; seq++) {
      await nats.js.publish(`${prefix}.in.other.result.mallory`, new TextEncoder().encode('{}'), { msgID: `offer:${P}:h-squat:${seq}` });
    }
    handoffOf(
      await client.create(P, { handoff_id: 'h-squat', from_agent: 'alice', to_agent: 'lena', summary: 's', idempotency_key: 'create-h-squat' }, as('alice')),
    );
    const [created] = (await store.read({ project: P, kind: 'handoff', id: 'h-squat' })).events;
    expect(created!.seq).toBeLessThanOrEqual(last + 6);
    const offered = (await offers(nats, prefix, P, 'lena')).filter((m) => (m.json() as HandoffRecord).id === 'h-squat');
    expect(offered.map((m) => m.header('Baton-Event-Seq'))).toEqual([String(created!.seq)]);
  });

  it('complete_then_create: the completion, then the creation, stored in that order as the two commands alone would; a retry adds nothing; router only', async () => {
    handoffOf(
      await client.create(P, { handoff_id: 'h-ctc-1', from_agent: 'alice', to_agent: 'bob', summary: 's', idempotency_key: 'create-ctc-1' }, as('alice')),
    );
    const body = {
      complete: { handoff_id: 'h-ctc-1', result_id: 'r-ctc-1', agent: 'bob', evidence: {}, idempotency_key: 'result:r-ctc-1' },
      create: { handoff_id: 'h-ctc-2', from_agent: 'bob', to_agent: 'alice', summary: 'next step', idempotency_key: 'routed-ctc-2' },
    };
    expect(await client.completeThenCreate(P, body, as('bob'))).toMatchObject({ ok: false, error: { code: 'principal_not_allowed', kind: 'forbidden' } });
    expect(await eventCount('h-ctc-2')).toBe(0);

    const reply = await client.completeThenCreate(P, body, callers.router);
    if (!reply.ok) throw new Error(`expected ok, got ${reply.error.code}`);
    expect(handoffOf(reply.complete)).toMatchObject({ id: 'h-ctc-1', status: 'completed', result_id: 'r-ctc-1' });
    expect(handoffOf(reply.create!)).toMatchObject({ id: 'h-ctc-2', status: 'pending', from_agent: 'bob', to_agent: 'alice' });
    const completed = (await store.read({ project: P, kind: 'handoff', id: 'h-ctc-1' })).events.at(-1)!;
    const created = (await store.read({ project: P, kind: 'handoff', id: 'h-ctc-2' })).events;
    expect(completed.type).toBe('handoff.completed_by_result');
    expect(created.map((e) => e.type)).toEqual(['handoff.created']);
    expect(completed.seq).toBeLessThan(created[0]!.seq);

    // The same request again (a redelivered result): both parts answer as applied, nothing is stored.
    const again = await client.completeThenCreate(P, body, callers.router);
    expect(again).toMatchObject({ ok: true, complete: { ok: true, handoff: { status: 'completed' } }, create: { ok: true, handoff: { status: 'pending' } } });
    expect([await eventCount('h-ctc-1'), await eventCount('h-ctc-2')]).toEqual([2, 1]);

    // A completion done before under another key (handoff_not_open) still lets the creation through.
    const later = await client.completeThenCreate(
      P,
      {
        complete: { ...body.complete, result_id: 'r-ctc-9', idempotency_key: 'result:r-ctc-9' },
        create: { ...body.create, handoff_id: 'h-ctc-3', idempotency_key: 'routed-ctc-3' },
      },
      callers.router,
    );
    expect(later).toMatchObject({ ok: true, complete: { ok: false, error: { code: 'handoff_not_open' } }, create: { ok: true, handoff: { id: 'h-ctc-3' } } });
  });

  it("a handoff the router creates for a route takes the route's origin (a person's answer: human); an agent's create says it as well and stays the agent's", async () => {
    const route = (origin: string) => ({ dispatch: { target: 'bob', origin, reason: 'approved by a person' } });
    handoffOf(
      await client.create(
        P,
        { handoff_id: 'h-origin-1', from_agent: 'alice', to_agent: 'bob', summary: 's', context: route('human'), idempotency_key: 'routed-origin-1' },
        callers.router,
      ),
    );
    handoffOf(
      await client.create(
        P,
        { handoff_id: 'h-origin-2', from_agent: 'alice', to_agent: 'bob', summary: 's', context: route('engine_fallback'), idempotency_key: 'routed-origin-2' },
        callers.router,
      ),
    );
    handoffOf(
      await client.create(
        P,
        { handoff_id: 'h-origin-3', from_agent: 'alice', to_agent: 'bob', summary: 's', idempotency_key: 'routed-origin-3' },
        callers.router,
      ),
    );
    handoffOf(
      await client.create(
        P,
        { handoff_id: 'h-origin-4', from_agent: 'alice', to_agent: 'bob', summary: 's', context: route('human'), idempotency_key: 'create-origin-4' },
        as('alice'),
      ),
    );
    const createdOrigin = async (id: string) => (await store.read({ project: P, kind: 'handoff', id })).events[0]!;
    expect(await createdOrigin('h-origin-1')).toMatchObject({ type: 'handoff.created', actor: 'baton-router', origin: 'human' });
    expect(await createdOrigin('h-origin-2')).toMatchObject({ origin: 'engine_fallback' });
    expect(await createdOrigin('h-origin-3')).toMatchObject({ origin: 'engine_fallback' }); // no route stated: Baton acting on its own
    expect(await createdOrigin('h-origin-4')).toMatchObject({ actor: 'alice', origin: 'agent' });
  });

  it('complete_then_create: a refused completion creates nothing; a malformed part refuses the whole request (dead letter, issue paths under the part)', async () => {
    const create = { handoff_id: 'h-ctc-5', from_agent: 'bob', to_agent: 'alice', summary: 'next', idempotency_key: 'routed-ctc-5' };
    const missing = await client.completeThenCreate(
      P,
      { complete: { handoff_id: 'h-ctc-none', result_id: 'r-x', agent: 'bob', evidence: {}, idempotency_key: 'result:r-x' }, create },
      callers.router,
    );
    expect(missing).toEqual({ ok: true, complete: { ok: false, error: expect.objectContaining({ code: 'not_found' }) }, create: null });
    expect(await eventCount('h-ctc-5')).toBe(0);

    handoffOf(
      await client.create(P, { handoff_id: 'h-ctc-4', from_agent: 'alice', to_agent: 'bob', summary: 's', idempotency_key: 'create-ctc-4' }, as('alice')),
    );
    const malformed = await client.completeThenCreate(
      P,
      {
        complete: { handoff_id: 'h-ctc-4', result_id: 'r-ctc-4', agent: 'bob', evidence: {}, idempotency_key: 'result:r-ctc-4' },
        create: { ...create, kind: 'errand' } as typeof create,
      },
      callers.router,
    );
    expect(malformed).toMatchObject({
      ok: false,
      error: { code: 'schema_violation', kind: 'rejected', details: { issues: [expect.objectContaining({ path: 'create.kind' })] } },
    });
    // Something beside the two parts, or a part that is no object, refuses the request as well.
    const stray = await client.completeThenCreate(P, { complete: { handoff_id: 'h-ctc-4' }, create, also: 1 } as never, callers.router);
    expect(stray).toMatchObject({ ok: false, error: { code: 'schema_violation', kind: 'rejected' } });
    const notObject = await client.completeThenCreate(P, { complete: 'h-ctc-4', create } as never, callers.router);
    expect(notObject).toMatchObject({ ok: false, error: { code: 'schema_violation', details: { issues: [expect.objectContaining({ path: 'complete' })] } } });
    // Nothing was decided: the handoff the completion names is still pending, the new one absent.
    expect([await eventCount('h-ctc-4'), await eventCount('h-ctc-5')]).toEqual([1, 0]);
    const letter = await waitFor(
      async () => (await deadLetters(nats, prefix, 'ledger')).find((m) => m.header(DlqHeader.subject)?.endsWith('.svc.router.complete_then_create')),
      'the rejected complete_then_create as a dead letter',
      { timeoutMs: 8000 },
    );
    expect(letter.header(DlqHeader.reason)).toBe('schema_violation');
  });

  it('rule 4a: a result accepted under a claim whose requeue reached the ledger first voids the lapse when it completes the handoff', async () => {
    handoffOf(
      await client.create(P, { handoff_id: 'h-void', from_agent: 'alice', to_agent: 'bob', summary: 's', idempotency_key: 'create-void' }, as('alice')),
    );
    const claimed = handoffOf(await client.claim(P, { handoff_id: 'h-void', lease_ms: 1000, idempotency_key: 'claim-void' }, as('bob')));
    await new Promise((resolve) => setTimeout(resolve, 1100));
    // The router accepted bob's result under this claim just before it ran out; the watchdog's requeue lands first.
    const requeued = handoffOf(
      await client.requeueExpired(P, { handoff_id: 'h-void', claim_id: claimed.claim_id!, idempotency_key: 'rq-void' }, callers.watchdog),
    );
    expect(requeued).toMatchObject({ status: 'pending', retry: { retry_count: 1 } });
    const body = { handoff_id: 'h-void', result_id: 'r-void', agent: 'bob', claim_id: claimed.claim_id!, evidence: {}, idempotency_key: 'r-void' };
    const done = handoffOf(await client.completeFromResult(P, body, callers.router));
    expect(done).toMatchObject({ status: 'completed', result_id: 'r-void', retry: { retry_count: 0 } });
    const events = (await store.read({ project: P, kind: 'handoff', id: 'h-void' })).events;
    expect(events.map((e) => e.type)).toEqual(['handoff.created', 'handoff.claimed', 'handoff.lease_expired', 'handoff.completed_by_result']);
    expect(events.at(-1)!.payload).toMatchObject({ lapse_voided: { claim_id: claimed.claim_id, claimer: 'bob', retry_count: 0 } });
    // The same completion retried changes nothing; a result under another claim would void nothing (domain spec).
    expect(handoffOf(await client.completeFromResult(P, body, callers.router))).toMatchObject({ status: 'completed', retry: { retry_count: 0 } });
    expect(await eventCount('h-void')).toBe(4);
  });

  it("a person's abandon of a run's handoff whose run already recorded the agent's result is refused result_already_recorded (the router is closing it); without one it is abandoned", async () => {
    const runEvent = (run: string, handoffId: string, claimId: string) => {
      const at = new Date().toISOString();
      return {
        id: `recorded-${handoffId}`,
        type: 'run.result_recorded',
        version: 1,
        aggregate: { kind: 'run' as const, id: run },
        project: P,
        occurredAt: at,
        actor: 'bob',
        origin: 'agent' as const,
        causationId: null,
        correlationId: run,
        payload: {
          result_id: `r-${handoffId}`,
          run_id: `ar-${handoffId}`,
          agent: 'bob',
          step: 's',
          signal: { kind: 'absent' },
          handoff_id: handoffId,
          claim_id: claimId,
          recorded_at: at,
        },
      };
    };
    // A run's handoffs, as the router creates them (an agent names a run only while it waits for it: not_in_run).
    for (const id of ['h-taken', 'h-free']) {
      handoffOf(
        await client.create(
          P,
          { handoff_id: id, from_agent: 'alice', to_agent: 'bob', summary: 's', workflow_run_id: `wr-${id}`, idempotency_key: `create-${id}` },
          callers.router,
        ),
      );
    }
    const claimed = handoffOf(await client.claim(P, { handoff_id: 'h-taken', idempotency_key: 'claim-taken' }, as('bob')));
    handoffOf(await client.claim(P, { handoff_id: 'h-free', idempotency_key: 'claim-free' }, as('bob')));
    // The router recorded bob's result on the run; its completion of the handoff has not landed yet.
    await store.append({ project: P, kind: 'run', id: 'wr-h-taken' }, [runEvent('wr-h-taken', 'h-taken', claimed.claim_id!)], { expectedVersion: 0 });

    const refused = errorOf(
      await client.abandon(P, { handoff_id: 'h-taken', reason: 'withdrawn', idempotency_key: 'abandon-taken' }, callers.operator('olga')),
    );
    expect(refused).toMatchObject({
      code: 'result_already_recorded',
      kind: 'wrong_state',
      details: { handoff_id: 'h-taken', workflow_run_id: 'wr-h-taken', result_id: 'r-h-taken' },
    });
    expect(await eventCount('h-taken')).toBe(2);
    // The completion then closes it as the run said.
    const body = { handoff_id: 'h-taken', result_id: 'r-h-taken', agent: 'bob', claim_id: claimed.claim_id!, evidence: {}, idempotency_key: 'r-h-taken' };
    expect(handoffOf(await client.completeFromResult(P, body, callers.router))).toMatchObject({ status: 'completed', result_id: 'r-h-taken' });

    // A run that recorded nothing for its handoff: the person's abandon withdraws it.
    const abandoned = handoffOf(
      await client.abandon(P, { handoff_id: 'h-free', reason: 'withdrawn', idempotency_key: 'abandon-free' }, callers.operator('olga')),
    );
    expect(abandoned).toMatchObject({ status: 'abandoned' });
  });

  it('lease expiry → watchdog requeue: pending again with retry_count + 1 and offered to the addressee again', async () => {
    handoffOf(
      await client.create(P, { handoff_id: 'h-lease', from_agent: 'alice', to_agent: 'bob', summary: 's', idempotency_key: 'create-lease' }, as('alice')),
    );
    const claimed = handoffOf(await client.claim(P, { handoff_id: 'h-lease', lease_ms: 1000, idempotency_key: 'claim-lease' }, as('bob')));
    const early = await client.requeueExpired(P, { handoff_id: 'h-lease', claim_id: claimed.claim_id!, idempotency_key: 'rq-early' }, callers.watchdog);
    expect(errorOf(early).code).toBe('lease_not_expired');
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const requeued = handoffOf(
      await client.requeueExpired(P, { handoff_id: 'h-lease', claim_id: claimed.claim_id!, idempotency_key: 'rq-1' }, callers.watchdog),
    );
    expect(requeued).toMatchObject({ status: 'pending', retry: { retry_count: 1 } });
    const offered = (m: { json(): unknown }) => m.json() as HandoffRecord;
    const list = await waitFor(
      async () => {
        const all = await offers(nats, prefix, P, 'bob');
        return all.some((m) => offered(m).id === 'h-lease' && offered(m).retry.retry_count === 1) ? all : undefined;
      },
      'h-lease offered to bob again',
      { timeoutMs: 8000 },
    );
    expect(
      list
        .filter((m) => offered(m).id === 'h-lease')
        .at(-1)!
        .header('Baton-Event-Type'),
    ).toBe('handoff.lease_expired');
  });

  it('to_role addressing: the ledger resolves the claimer`s role from the project definition', async () => {
    handoffOf(await client.create(P, { handoff_id: 'h-role', from_agent: 'alice', to_role: 'dev', summary: 's', idempotency_key: 'create-role' }, as('alice')));
    expect(errorOf(await client.claim(P, { handoff_id: 'h-role', idempotency_key: 'claim-role-lena' }, as('lena'))).code).toBe('not_the_addressee');
    expect(handoffOf(await client.claim(P, { handoff_id: 'h-role', idempotency_key: 'claim-role-bob' }, as('bob'))).claimed_by).toBe('bob');
  });

  it('a returned parent abandoned by its delegator withdraws its open review: the handback is abandoned by the ledger, and deciding it is refused review_withdrawn', async () => {
    const returned = await createAndReturn('h-withdrawn');
    const handbackId = returned.handback_id!;
    await waitFor(() => client.get(P, handbackId), `the handback ${handbackId}`, { timeoutMs: 8000 });
    handoffOf(await client.abandon(P, { handoff_id: 'h-withdrawn', reason: 'no longer needed', idempotency_key: 'abandon-w' }, as('alice')));
    const withdrawn = await waitFor(
      async () => {
        const h = await client.get(P, handbackId);
        return h?.status === 'abandoned' ? h : undefined;
      },
      'the review withdrawn',
      { timeoutMs: 8000 },
    );
    expect(withdrawn).toMatchObject({ terminal_reason: 'the work it reviews (h-withdrawn) was abandoned' });
    // Refused as withdrawn (not merely closed): the reply says the work it reviews ended.
    expect(await client.decideHandback(P, { handoff_id: handbackId, decision: 'accept', idempotency_key: 'accept-w' }, as('alice'))).toMatchObject({
      ok: false,
      error: {
        code: 'review_withdrawn',
        kind: 'wrong_state',
        details: { handoff_id: handbackId, parent_handoff_id: 'h-withdrawn', parent_status: 'abandoned' },
      },
    });
    expect(await deadLetters(nats, prefix, 'ledger-handoff-reactor')).toHaveLength(0);
  });

  it('a handback decision and an abandon of its parent, one right after the other: the second is refused, the parent ends as the first said, and no policy is refused', async () => {
    const lettersBefore = (await deadLetters(nats, prefix, 'ledger-handoff-reactor')).length;
    // Decided first: the abandon is refused (the decision is moving the parent), and the parent completes.
    const first = (await createAndReturn('h-decide-first')).handback_id!;
    await waitFor(() => client.get(P, first), `the handback ${first}`, { timeoutMs: 8000 });
    handoffOf(await client.decideHandback(P, { handoff_id: first, decision: 'accept', idempotency_key: 'accept-df' }, as('alice')));
    const late = await client.abandon(P, { handoff_id: 'h-decide-first', reason: 'too late', idempotency_key: 'abandon-df' }, as('alice'));
    expect(late.ok).toBe(false);
    expect(['handback_already_decided', 'handoff_not_open']).toContain(late.ok ? 'applied' : late.error.code);
    await waitFor(async () => ((await client.get(P, 'h-decide-first'))?.status === 'completed' ? true : undefined), 'the parent completed', {
      timeoutMs: 8000,
    });
    // Abandoned first: the decision is refused (the review is being withdrawn), and the parent stays abandoned.
    const second = (await createAndReturn('h-abandon-first')).handback_id!;
    await waitFor(() => client.get(P, second), `the handback ${second}`, { timeoutMs: 8000 });
    handoffOf(await client.abandon(P, { handoff_id: 'h-abandon-first', reason: 'withdrawn', idempotency_key: 'abandon-af' }, as('alice')));
    const refused = await client.decideHandback(P, { handoff_id: second, decision: 'rework', note: 'more tests', idempotency_key: 'rework-af' }, as('alice'));
    expect(refused.ok).toBe(false);
    expect(['review_withdrawn', 'handoff_not_open']).toContain(refused.ok ? 'applied' : refused.error.code);
    expect((await client.get(P, 'h-abandon-first'))?.status).toBe('abandoned');
    await sleep(300);
    expect(await deadLetters(nats, prefix, 'ledger-handoff-reactor')).toHaveLength(lettersBefore);
  });

  it('a handback decision and an abandon of its parent sent at the same instant (accept and rework, 8 races each): never both a decision that moved nothing — the parent ends as the applied answers say, and no policy is refused', async () => {
    const lettersBefore = (await deadLetters(nats, prefix, 'ledger-handoff-reactor')).length;
    const outcomes: string[] = [];
    for (const decision of ['accept', 'rework'] as const) {
      const parents = Array.from({ length: 8 }, (_, i) => `h-race-${decision}-${i}`);
      const handbacks: string[] = [];
      for (const parent of parents) handbacks.push((await createAndReturn(parent)).handback_id!);
      for (const handback of handbacks) await waitFor(() => client.get(P, handback), `the handback ${handback}`, { timeoutMs: 8000 });
      await Promise.all(
        parents.map(async (parent, i) => {
          const decide = () =>
            client.decideHandback(
              P,
              decision === 'accept'
                ? { handoff_id: handbacks[i]!, decision, idempotency_key: `d-${parent}` }
                : { handoff_id: handbacks[i]!, decision, note: 'cover the error paths', idempotency_key: `d-${parent}` },
              callers.operator('olga'),
            );
          const abandon = () =>
            client.abandon(P, { handoff_id: parent, reason: 'withdraw the work', idempotency_key: `a-${parent}` }, callers.operator('oscar'));
          // Sent together, in either order.
          const [decided, abandoned] = i % 2 === 0 ? await Promise.all([decide(), abandon()]) : (await Promise.all([abandon(), decide()])).reverse();
          const code = (reply: typeof decided) => (reply!.ok ? 'applied' : reply!.error.code);
          outcomes.push(`${decision}:${code(decided)}/${code(abandoned)}`);
          // What the replies said is what the parent did: its events are read once the reactor is quiet.
          const parentEvents = async () => (await store.read({ project: P, kind: 'handoff', id: parent })).events.map((e) => e.type);
          if (decided!.ok) {
            const moved = decision === 'accept' ? 'handoff.completed' : 'handoff.reworked';
            await waitFor(async () => ((await parentEvents()).includes(moved) ? true : undefined), `${parent} moved by the decision`, { timeoutMs: 8000 });
            // An abandon also applied may only have ended the work the rework reopened, after it.
            if (abandoned!.ok) {
              expect(decision).toBe('rework');
              const types = await parentEvents();
              expect(types.indexOf('handoff.abandoned')).toBeGreaterThan(types.indexOf('handoff.reworked'));
            } else {
              expect(['handoff_not_open', 'handback_already_decided']).toContain(abandoned!.error.code);
            }
          } else {
            expect(decided!.error.code).toBe('review_withdrawn');
            expect(abandoned!.ok).toBe(true);
            const types = await parentEvents();
            expect(types).toContain('handoff.abandoned');
            expect(types).not.toContain('handoff.completed');
            expect(types).not.toContain('handoff.reworked');
            await waitFor(async () => ((await client.get(P, handbacks[i]!))?.status === 'abandoned' ? true : undefined), `${handbacks[i]} withdrawn`, {
              timeoutMs: 8000,
            });
          }
        }),
      );
    }
    expect(outcomes).toHaveLength(16);
    await sleep(300);
    expect(await deadLetters(nats, prefix, 'ledger-handoff-reactor')).toHaveLength(lettersBefore);
  });

  it('a refused policy command is logged and recorded as a dead letter, not retried, and the reactor keeps going', async () => {
    // A decision that raced the withdrawal (stored on the handback after its parent ended): the
    // policy's complete_from_handback then hits an abandoned parent and is refused.
    const returned = await createAndReturn('h-raced');
    const handbackId = returned.handback_id!;
    await waitFor(() => client.get(P, handbackId), `the handback ${handbackId}`, { timeoutMs: 8000 });
    handoffOf(await client.abandon(P, { handoff_id: 'h-raced', reason: 'no longer needed', idempotency_key: 'abandon-r' }, as('alice')));
    await waitFor(async () => ((await client.get(P, handbackId))?.status === 'abandoned' ? true : undefined), 'the review withdrawn', { timeoutMs: 8000 });
    const ref = { project: P, kind: 'handoff' as const, id: handbackId };
    const at = new Date().toISOString();
    await store.append(
      ref,
      [
        {
          id: `raced-decision-${handbackId}`,
          type: 'handoff.handback_decided',
          version: 1,
          aggregate: { kind: 'handoff', id: handbackId },
          project: P,
          occurredAt: at,
          actor: 'alice',
          origin: 'agent',
          causationId: null,
          correlationId: handbackId,
          payload: {
            handoff_id: handbackId,
            at,
            idempotency_key: 'accept-raced',
            parent_handoff_id: 'h-raced',
            decision: 'accept',
            decided_by: 'alice',
            decided_by_kind: 'agent',
          },
        },
      ],
      { expectedVersion: (await store.read(ref)).lastSeq },
    );

    const [letter] = await waitFor(
      async () => {
        const all = await deadLetters(nats, prefix, 'ledger-handoff-reactor');
        return all.length > 0 ? all : undefined;
      },
      'a ledger-handoff-reactor dead letter',
      { timeoutMs: 8000 },
    );
    expect(letter!.header(DlqHeader.reason)).toBe('policy_refused');
    expect(letter!.header(DlqHeader.detail)).toContain('handoff_not_returned');
    expect((await client.get(P, 'h-raced'))!.status).toBe('abandoned');
    // The reactor moved on: a later return still gets its handback.
    const next = await createAndReturn('h-after-refusal');
    await waitFor(() => client.get(P, next.handback_id!), 'the next handback', { timeoutMs: 8000 });
    expect(await deadLetters(nats, prefix, 'ledger-handoff-reactor')).toHaveLength(1);
  });

  it('GET /metrics reports its fold cache: what it keeps, what that weighs (an estimate within the bound) and the bound', async () => {
    // After the tests above (last: a new handoff's offer would reach a test that waits for one).
    await createAndReturn('h-metrics');
    const text = await (await fetch(`${await ledgerA.app.getUrl()}/metrics`)).text();
    const cached = ledgerA.runtime.store.foldCache();
    expect(cached.entries).toBeGreaterThan(0);
    expect(metricSample(text, MetricName.foldCacheMaxBytes, { service: 'ledger' })).toBe(LEDGER_FOLD_CACHE_MB * 1024 * 1024);
    const entries = metricSample(text, MetricName.foldCacheEntries, { service: 'ledger' }) ?? 0;
    const bytes = metricSample(text, MetricName.foldCacheBytes, { service: 'ledger' }) ?? 0;
    expect(entries).toBeGreaterThan(0);
    // A folded handoff weighs a kilobyte or more (its state, its events' ids and wrappers).
    expect(bytes).toBeGreaterThan(entries * 1_000);
    expect(bytes).toBeLessThanOrEqual(LEDGER_FOLD_CACHE_MB * 1024 * 1024);
    expect(metricSample(text, MetricName.foldCacheEvictions, { service: 'ledger' })).toBe(0);
  });
});
