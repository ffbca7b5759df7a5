import { ledgerCommandSubject, Principals, type HandoffRecord, type LedgerReply, type ProjectDefinition } from '@baton/contracts';
import { LedgerClient, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { LedgerCommands } from './commands/ledger-commands';
import { claimRateBucket } from './governance/claim-rate-store';
import { ClaimWindow } from './governance/rate-limiter';
import { callers, bootLedger, claimRateStream, connectTest, deleteStreams, publishDefinition, randomPrefix } from './int/support';

// The per-agent claim cap is one count for every ledger instance of a prefix (a JetStream KV
// bucket). Two instances share a prefix here; claims are sent to a chosen instance by calling its
// command handler directly (the queue group would pick one at random), and also through NATS.

const P = 'rates';
const encoder = new TextEncoder();
const definition = (project: string, agents: string[]): ProjectDefinition =>
  ({ project, agents: agents.map((name) => ({ name })), workflows: [], meshes: [] }) as unknown as ProjectDefinition;

function handoffOf(reply: LedgerReply): HandoffRecord {
  if (!reply.ok) throw new Error(`expected ok, got ${reply.error.code}: ${reply.error.message}`);
  return reply.handoff;
}

/** Send a claim to one chosen ledger instance (its command handler, exactly as its NATS listener would). */
async function claimVia(ledger: RunningService, prefix: string, project: string, handoffId: string, key: string, actor: string): Promise<LedgerReply> {
  const data = encoder.encode(JSON.stringify({ handoff_id: handoffId, idempotency_key: key }));
  const subject = ledgerCommandSubject(prefix, project, Principals.agent(project, actor), 'claim');
  return (await ledger.app.get(LedgerCommands).handle({ subject, headers: {}, data })) as LedgerReply;
}

function expectRateLimited(reply: LedgerReply, limit: number, windowMs: number): void {
  expect(reply).toMatchObject({ ok: false, error: { code: 'rate_limited', kind: 'unavailable', details: { limit } } });
  if (reply.ok) throw new Error('unreachable');
  const retry = reply.error.details?.['retry_after_ms'];
  expect(retry).toEqual(expect.any(Number));
  expect(retry as number).toBeGreaterThan(0);
  // A claim counts until its slot has fully left the window: at most (slots + 1) slot lengths
  // after it (slot lengths round up, so this can exceed windowMs + slotMs for a short window).
  const window = new ClaimWindow(windowMs);
  expect(retry as number).toBeLessThanOrEqual((window.slots + 1) * window.slotMs);
}

async function createMany(client: LedgerClient, project: string, to: string, tag: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = `${tag}-${i}`;
    handoffOf(
      await client.create(
        project,
        { handoff_id: id, from_agent: 'alice', to_agent: to, summary: 'work', idempotency_key: `c-${id}` },
        callers.agent(project, 'alice'),
      ),
    );
    ids.push(id);
  }
  return ids;
}

describe('claim rate cap across ledger instances (real NATS, one KV bucket per prefix)', () => {
  const prefix = randomPrefix();
  const env = { LEDGER_AGENT_CLAIM_CAPS: 'rita=4,cora=4,rex=2,tess=4', LEDGER_DEFINITION_TTL_MS: '0' };
  const W = 60_000;
  let nats: NatsHandle;
  let a: RunningService;
  let b: RunningService;
  let client: LedgerClient;

  beforeAll(async () => {
    nats = await connectTest();
    // Both at once: creating the bucket from two instances concurrently must not fail either.
    [a, b] = await Promise.all([bootLedger(prefix, 'ledger-rate-a', env), bootLedger(prefix, 'ledger-rate-b', env)]);
    await publishDefinition(nats, prefix, definition(P, ['alice', 'bob', 'rita', 'cora', 'rex', 'tess']));
    client = new LedgerClient(nats, prefix, { timeoutMs: 5000, attempts: 1 });
  });

  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    if (nats) {
      await deleteStreams(nats, prefix);
      await nats.close();
    }
  });

  it('the instances created one bucket at start: history 1, keys expire a little after the window, replicas as configured', async () => {
    const info = await nats.jsm.streams.info(claimRateStream(prefix));
    expect(info.config.max_msgs_per_subject).toBe(1);
    expect(info.config.num_replicas).toBe(1);
    expect(info.config.max_age).toBe(new ClaimWindow(W).retentionMs * 1_000_000);
    expect(info.config.max_age).toBeGreaterThan(W * 1_000_000);
  });

  it('claims alternately through both instances: exactly 4 of 8 granted, the rest rate_limited with retry_after_ms > 0; other agents unaffected', async () => {
    const ids = await createMany(client, P, 'rita', 'alt', 8);
    const replies: LedgerReply[] = [];
    for (const [i, id] of ids.entries()) replies.push(await claimVia(i % 2 === 0 ? a : b, prefix, P, id, `k-${id}`, 'rita'));
    expect(replies.filter((r) => r.ok)).toHaveLength(4);
    expect(replies.slice(0, 4).every((r) => r.ok)).toBe(true);
    for (const refused of replies.slice(4)) expectRateLimited(refused, 4, W);

    // Another capped agent has its own count; an agent without a cap is not counted at all.
    const tess = await createMany(client, P, 'tess', 'tess', 2);
    expect(handoffOf(await claimVia(b, prefix, P, tess[0] as string, 'k-t0', 'tess')).status).toBe('claimed');
    expect(handoffOf(await claimVia(a, prefix, P, tess[1] as string, 'k-t1', 'tess')).status).toBe('claimed');
    const bob = await createMany(client, P, 'bob', 'bob', 6);
    for (const [i, id] of bob.entries()) expect(handoffOf(await claimVia(i % 2 === 0 ? a : b, prefix, P, id, `k-${id}`, 'bob')).status).toBe('claimed');
  });

  it('concurrent claims through both instances and the queue group: exactly 4 granted, and the shared count says 4', async () => {
    const ids = await createMany(client, P, 'cora', 'conc', 12);
    const replies = await Promise.all(
      ids.map((id, i) => {
        if (i % 3 === 0) return claimVia(a, prefix, P, id, `k-${id}`, 'cora');
        if (i % 3 === 1) return claimVia(b, prefix, P, id, `k-${id}`, 'cora');
        return client.claim(P, { handoff_id: id, idempotency_key: `k-${id}` }, callers.agent(P, 'cora'));
      }),
    );
    expect(replies.filter((r) => r.ok)).toHaveLength(4);
    for (const refused of replies.filter((r) => !r.ok)) expectRateLimited(refused, 4, W);

    const kv = await nats.js.views.kv(claimRateBucket(prefix), { bindOnly: true });
    const entry = await kv.get(`${P}.cora`);
    expect(entry).not.toBeNull();
    expect(new ClaimWindow(W).count(new ClaimWindow(W).decode(entry!.value), Date.now())).toBe(4);
  });

  it('a claim that is not granted gives its place back: a retried claim and refused claims do not count', async () => {
    const [h1, h2, h3] = await createMany(client, P, 'rex', 'rex', 3);
    const [bobs] = await createMany(client, P, 'bob', 'rexbob', 1);
    expect(handoffOf(await claimVia(a, prefix, P, h1 as string, 'r-1', 'rex')).status).toBe('claimed'); // 1 of 2
    // The same claim again (a client retry) through the other instance: answered with the claim
    // stored by the first request, not counted again.
    expect(await claimVia(b, prefix, P, h1 as string, 'r-1', 'rex')).toMatchObject({ ok: true, handoff: { status: 'claimed' } });
    expect(await claimVia(a, prefix, P, h1 as string, 'r-1', 'rex')).toMatchObject({ ok: true, handoff: { status: 'claimed' } });
    // Refused by the handoff rules: not counted either.
    expect(await claimVia(a, prefix, P, h1 as string, 'r-1-again', 'rex')).toMatchObject({ ok: false, error: { code: 'handoff_not_pending' } });
    expect(await claimVia(b, prefix, P, bobs as string, 'r-bob', 'rex')).toMatchObject({ ok: false, error: { code: 'not_the_addressee' } });
    expect(handoffOf(await claimVia(b, prefix, P, h2 as string, 'r-2', 'rex')).status).toBe('claimed'); // 2 of 2
    expectRateLimited(await claimVia(a, prefix, P, h3 as string, 'r-3', 'rex'), 2, W);
  });

  it('when the KV cannot be used the claim is answered unavailable; the ledger keeps serving and recreates the bucket', async () => {
    const [t2, t3] = await createMany(client, P, 'tess', 'kvgone', 2);
    const [free] = await createMany(client, P, 'bob', 'kvgone-bob', 1);
    await nats.jsm.streams.delete(claimRateStream(prefix));

    expect(await claimVia(a, prefix, P, t2 as string, 'g-2', 'tess')).toMatchObject({ ok: false, error: { code: 'unavailable', kind: 'unavailable' } });
    // An agent without a cap never needs the KV.
    expect(handoffOf(await claimVia(a, prefix, P, free as string, 'g-bob', 'bob')).status).toBe('claimed');
    // The next claim opens the bucket again (recreating it): the retry of the same claim goes through.
    expect(handoffOf(await claimVia(a, prefix, P, t2 as string, 'g-2', 'tess')).status).toBe('claimed');
    expect(handoffOf(await claimVia(b, prefix, P, t3 as string, 'g-3', 'tess')).status).toBe('claimed');
    await expect(nats.jsm.streams.info(claimRateStream(prefix))).resolves.toBeTruthy();
  });
});

describe('claim rate cap: the window moves on (real NATS, a 1 s window)', () => {
  const prefix = randomPrefix();
  const windowMs = 1_000;
  let nats: NatsHandle;
  let a: RunningService;
  let b: RunningService;
  let client: LedgerClient;

  beforeAll(async () => {
    nats = await connectTest();
    const env = { LEDGER_CLAIMS_PER_MINUTE: '2', LEDGER_DEFINITION_TTL_MS: '0' };
    [a, b] = await Promise.all([
      bootLedger(prefix, 'ledger-win-a', env, { claimWindowMs: windowMs }),
      bootLedger(prefix, 'ledger-win-b', env, { claimWindowMs: windowMs }),
    ]);
    await publishDefinition(nats, prefix, definition(P, ['alice', 'wes']));
    client = new LedgerClient(nats, prefix, { timeoutMs: 5000, attempts: 1 });
  });

  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    if (nats) {
      await deleteStreams(nats, prefix);
      await nats.close();
    }
  });

  it('after retry_after_ms a claim through the other instance is granted again', async () => {
    const ids = await createMany(client, P, 'wes', 'win', 4);
    expect((await claimVia(a, prefix, P, ids[0] as string, 'w-0', 'wes')).ok).toBe(true);
    expect((await claimVia(b, prefix, P, ids[1] as string, 'w-1', 'wes')).ok).toBe(true);
    const refused = await claimVia(a, prefix, P, ids[2] as string, 'w-2', 'wes');
    expectRateLimited(refused, 2, windowMs);
    if (refused.ok) throw new Error('unreachable');
    await new Promise((resolve) => setTimeout(resolve, (refused.error.details?.['retry_after_ms'] as number) + 20));
    expect(handoffOf(await claimVia(b, prefix, P, ids[2] as string, 'w-2', 'wes')).status).toBe('claimed');
  });
});

describe('claim rate cap off (the default): no KV traffic at all', () => {
  const prefix = randomPrefix();
  let nats: NatsHandle;
  let ledger: RunningService;

  beforeAll(async () => {
    nats = await connectTest();
    ledger = await bootLedger(prefix, 'ledger-nocap', { LEDGER_DEFINITION_TTL_MS: '0' });
    await publishDefinition(nats, prefix, definition(P, ['alice', 'bob']));
  });

  afterAll(async () => {
    await ledger?.stop();
    if (nats) {
      await deleteStreams(nats, prefix);
      await nats.close();
    }
  });

  it('claims are granted and no claim-rate bucket is ever created', async () => {
    const client = new LedgerClient(nats, prefix, { timeoutMs: 5000, attempts: 1 });
    const ids = await createMany(client, P, 'bob', 'off', 5);
    for (const id of ids) expect(handoffOf(await claimVia(ledger, prefix, P, id, `k-${id}`, 'bob')).status).toBe('claimed');
    await expect(nats.jsm.streams.info(claimRateStream(prefix))).rejects.toThrow(/stream not found/);
  });
});
