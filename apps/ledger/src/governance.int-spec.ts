import {
  createEventRegistry,
  ledgerCommandSubject,
  Principals,
  ProjectControlReplySchema,
  type CompletionReport,
  type Principal,
  type HandoffRecord,
  type LedgerReply,
  type ProjectDefinition,
} from '@baton/contracts';
import { JetStreamEventStore, LedgerClient, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
import { agentsOf, bootLedger, callers, connectTest, deleteStreams, offers, publishDefinition, randomPrefix } from './int/support';

const P = 'gov';
const SRC = 'govsrc';
const as = agentsOf(P);
const asInSrc = agentsOf(SRC);
const report: CompletionReport = {
  summary: 'done',
  files_changed: [],
  verification: 'npm test',
  next_steps: '',
  outcome: 'completed',
  evidence: { tests_run: ['a.spec.ts: 1 passed'] },
};
const definition = (project: string, agents: string[], acceptsFrom?: string[]): ProjectDefinition =>
  ({
    project,
    ...(acceptsFrom ? { accepts_handoffs_from: acceptsFrom } : {}),
    agents: agents.map((name) => ({ name })),
    workflows: [],
    meshes: [],
  }) as unknown as ProjectDefinition;

function handoffOf(reply: LedgerReply): HandoffRecord {
  if (!reply.ok) throw new Error(`expected ok, got ${reply.error.code}: ${reply.error.message}`);
  return reply.handoff;
}

describe('ledger governance (real NATS): kill switch, rate cap, cross-project, deadline', () => {
  const prefix = randomPrefix();
  let nats: NatsHandle;
  let ledger: RunningService;
  let client: LedgerClient;
  let store: JetStreamEventStore;
  let n = 0;

  /** pause / resume as the notifier relaying an operator token (body: actor, actor_role) unless another principal is given. */
  const control = async (project: string, name: 'pause' | 'resume', body: Record<string, unknown>, principal: Principal = Principals.operator('notifier')) => {
    const msg = await nats.connection.request(ledgerCommandSubject(prefix, project, principal, name), new TextEncoder().encode(JSON.stringify(body)), {
      timeout: 5000,
    });
    return ProjectControlReplySchema.parse(JSON.parse(new TextDecoder().decode(msg.data)));
  };
  const create = (to: string, extra: Record<string, unknown> = {}) => {
    const id = `g-${++n}`;
    return client.create(P, { handoff_id: id, from_agent: 'alice', to_agent: to, summary: 'work', idempotency_key: `c-${id}`, ...extra }, as('alice'));
  };

  beforeAll(async () => {
    nats = await connectTest();
    ledger = await bootLedger(prefix, 'ledger-gov', { LEDGER_AGENT_CLAIM_CAPS: 'rita=2', LEDGER_DEFINITION_TTL_MS: '0' });
    // P has a `sam` too: someone else than SRC's `sam` (the cross-project handback test).
    await publishDefinition(nats, prefix, definition(P, ['alice', 'bob', 'rita', 'sam']));
    await publishDefinition(nats, prefix, definition(SRC, ['sam']));
    client = new LedgerClient(nats, prefix, { timeoutMs: 5000, attempts: 1 });
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
  });

  afterAll(async () => {
    await ledger?.stop();
    if (nats) {
      await deleteStreams(nats, prefix);
      await nats.close();
    }
  });

  it('kill switch: pause → claims refused (project_paused) and offers held; results still recorded; resume → every pending handoff re-offered and claimable', async () => {
    const before = handoffOf(await create('bob'));
    const claimedBefore = handoffOf(await client.claim(P, { handoff_id: before.id, idempotency_key: 'cl-before' }, as('bob')));

    expect(await control(P, 'pause', { actor: 'ops', actor_role: 'operator', reason: 'x', idempotency_key: 'p0' })).toMatchObject({
      ok: false,
      error: { code: 'principal_not_allowed', kind: 'forbidden' },
    });
    const paused = await control(P, 'pause', { actor: 'ops', actor_role: 'admin', reason: 'incident 42', idempotency_key: 'p1' });
    expect(paused).toMatchObject({ ok: true, project: { status: 'paused' } });
    // The same key: a retry with the same body, refused with another (rule 13).
    expect(await control(P, 'pause', { actor: 'ops', actor_role: 'admin', reason: 'incident 42', idempotency_key: 'p1' })).toMatchObject({
      ok: true,
      events: 0,
      project: { status: 'paused', version: 1 },
    });
    expect(await control(P, 'pause', { actor: 'ops', actor_role: 'admin', reason: 'incident 43', idempotency_key: 'p1' })).toMatchObject({
      ok: false,
      error: { code: 'idempotency_key_reused', kind: 'wrong_state', details: { project: P, idempotency_key: 'p1', command: 'pause' } },
    });
    // Another admin with the same key and body is decided as their own request, never answered with the first admin's pause.
    expect(await control(P, 'pause', { actor: 'ops2', actor_role: 'admin', reason: 'incident 42', idempotency_key: 'p1' })).toMatchObject({
      ok: false,
      error: { code: 'project_already_paused' },
    });

    const during = handoffOf(await create('bob'));
    const refused = await client.claim(P, { handoff_id: during.id, idempotency_key: 'cl-during' }, as('bob'));
    expect(refused).toMatchObject({ ok: false, error: { code: 'project_paused', kind: 'unavailable' } });
    // Work acknowledged before the pause is still recorded while paused.
    const returned = await client.return(P, { handoff_id: before.id, claim_id: claimedBefore.claim_id, report, idempotency_key: 'ret-before' }, as('bob'));
    expect(handoffOf(returned).status).toBe('returned');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(
      (await offers(nats, prefix, P, 'bob')).filter((o) => o.header('Baton-Handoff-Id') === during.id || (o.json() as { id: string }).id === during.id),
    ).toHaveLength(0);

    expect(await control(P, 'resume', { actor: 'ops', actor_role: 'admin', idempotency_key: 'r1' })).toMatchObject({ ok: true, project: { status: 'active' } });
    const reoffered = await waitFor(
      async () => {
        const list = (await offers(nats, prefix, P, 'bob')).filter((o) => (o.json() as { id: string }).id === during.id);
        return list.length === 1 ? list : undefined;
      },
      `${during.id} offered to bob again`,
      { timeoutMs: 8000 },
    );
    expect(reoffered).toHaveLength(1);
    expect(handoffOf(await client.claim(P, { handoff_id: during.id, idempotency_key: 'cl-after' }, as('bob'))).status).toBe('claimed');

    // Another admin's pause with the first one's key is another pause: its own pause id (the
    // re-offers of its resume are named by it, and are not taken for the first resume's).
    const second = await control(P, 'pause', { actor: 'ops2', actor_role: 'admin', reason: 'incident 42', idempotency_key: 'p1' });
    expect(second).toMatchObject({ ok: true, events: 1, project: { status: 'paused' } });
    const firstId = paused.ok ? paused.project.pause_id : undefined;
    expect(second.ok && second.project.pause_id).not.toBe(firstId);
    expect(await control(P, 'resume', { actor: 'ops2', actor_role: 'admin', idempotency_key: 'r2' })).toMatchObject({
      ok: true,
      project: { status: 'active' },
    });
  });

  it('kill switch: a project with no published definition is not paused (project_unknown, nothing stored) unless forced — a misspelt key is never reported paused', async () => {
    const typo = 'nodef';
    const refused = await control(typo, 'pause', { actor: 'ops', actor_role: 'admin', reason: 'incident 9', idempotency_key: 'p-typo' });
    expect(refused).toMatchObject({ ok: false, error: { code: 'project_unknown', kind: 'not_found', details: { project: typo } } });
    expect((await store.read({ project: typo, kind: 'project', id: 'control' })).events).toEqual([]);
    // Forced: paused before the project is set up, and its claims are refused like any paused project's.
    const forced = await control(typo, 'pause', { actor: 'ops', actor_role: 'admin', reason: 'not yet', idempotency_key: 'p-typo', force: true });
    expect(forced).toMatchObject({ ok: true, events: 1, project: { status: 'paused', reason: 'not yet' } });
    // Paused already: the answer is that, not a hint to force what force would not change.
    expect(await control(typo, 'pause', { actor: 'ops', actor_role: 'admin', reason: 'again', idempotency_key: 'p-typo-2' })).toMatchObject({
      ok: false,
      error: { code: 'project_already_paused' },
    });
    expect(await control(typo, 'resume', { actor: 'ops', actor_role: 'admin', idempotency_key: 'r-typo' })).toMatchObject({
      ok: true,
      project: { status: 'active' },
    });
    // A project with a definition needs no force.
    expect(await control(SRC, 'pause', { actor: 'ops', actor_role: 'admin', reason: 'drill', idempotency_key: 'p-src' })).toMatchObject({ ok: true });
    expect(await control(SRC, 'resume', { actor: 'ops', actor_role: 'admin', idempotency_key: 'r-src' })).toMatchObject({ ok: true });
  });

  it('a local create names agents of the project`s definition: an addressee it does not name is refused (addressee_not_in_roster), and so is a creator it does not name', async () => {
    const lost = await client.create(P, { handoff_id: 'r-1', from_agent: 'alice', to_agent: 'nobody', summary: 'x', idempotency_key: 'c-r-1' }, as('alice'));
    expect(lost).toMatchObject({ ok: false, error: { code: 'addressee_not_in_roster', kind: 'forbidden', details: { project: P, field: 'to_agent' } } });
    const ghost = await client.create(P, { handoff_id: 'r-2', from_agent: 'ghost', to_agent: 'bob', summary: 'x', idempotency_key: 'c-r-2' }, as('ghost'));
    expect(ghost).toMatchObject({ ok: false, error: { code: 'delegator_not_in_roster' } });
    expect((await store.read({ project: P, kind: 'handoff', id: 'r-1' })).events).toEqual([]);
    expect(
      await client.create(P, { handoff_id: 'r-3', from_agent: 'alice', to_agent: 'bob', summary: 'x', idempotency_key: 'c-r-3' }, as('alice')),
    ).toMatchObject({
      ok: true,
    });
  });

  it('rate cap: a claim over the agent cap is refused with rate_limited and retry_after_ms', async () => {
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(handoffOf(await create('rita')).id);
    expect((await client.claim(P, { handoff_id: ids[0] as string, idempotency_key: 'r-0' }, as('rita'))).ok).toBe(true);
    expect((await client.claim(P, { handoff_id: ids[1] as string, idempotency_key: 'r-1' }, as('rita'))).ok).toBe(true);
    const third = await client.claim(P, { handoff_id: ids[2] as string, idempotency_key: 'r-2' }, as('rita'));
    expect(third).toMatchObject({ ok: false, error: { code: 'rate_limited', kind: 'unavailable' } });
    if (third.ok) throw new Error('unreachable');
    expect(third.error.details?.['retry_after_ms']).toEqual(expect.any(Number));
    // Other agents are not capped.
    const other = handoffOf(await create('bob'));
    expect((await client.claim(P, { handoff_id: other.id, idempotency_key: 'b-x' }, as('bob'))).ok).toBe(true);
  });

  it('cross-project: validates both rosters, lives in the target project, never registers an agent in the other project', async () => {
    const body = { handoff_id: 'x-1', project: SRC, from_agent: 'sam', to_agent: 'bob', summary: 'help', target_project: P, idempotency_key: 'x-1' };
    // Until P's definition accepts handoffs from SRC, nothing about P's roster is told.
    expect(await client.create(SRC, { ...body, to_agent: 'nobody', cto_override: 'dec-1', idempotency_key: 'x-0' }, asInSrc('sam'))).toMatchObject({
      ok: false,
      error: { code: 'cross_project_not_accepted', details: { source_project: SRC, target_project: P } },
    });
    await publishDefinition(nats, prefix, definition(P, ['alice', 'bob', 'rita', 'sam'], [SRC]));
    const defBefore = (await store.read({ project: P, kind: 'definition', id: 'current' })).lastSeq;
    expect(await client.create(SRC, body, asInSrc('sam'))).toMatchObject({ ok: false, error: { code: 'cto_override_required' } });
    expect(await client.create(SRC, { ...body, to_agent: 'nobody', cto_override: 'dec-1', idempotency_key: 'x-2' }, asInSrc('sam'))).toMatchObject({
      ok: false,
      error: { code: 'addressee_not_in_target_roster' },
    });
    expect(await client.create(SRC, { ...body, from_agent: 'alice', cto_override: 'dec-1', idempotency_key: 'x-3' }, asInSrc('alice'))).toMatchObject({
      ok: false,
      error: { code: 'delegator_not_in_source_roster' },
    });
    const created = handoffOf(await client.create(SRC, { ...body, cto_override: 'dec-1', idempotency_key: 'x-4' }, asInSrc('sam')));
    expect(created).toMatchObject({ project: P, source_project: SRC, cto_override: 'dec-1' });
    expect((await store.read({ project: P, kind: 'handoff', id: 'x-1' })).events).toHaveLength(1);
    expect((await store.read({ project: SRC, kind: 'handoff', id: 'x-1' })).events).toHaveLength(0);
    expect((await store.read({ project: P, kind: 'definition', id: 'current' })).lastSeq).toBe(defBefore);

    // Returned in P, it is reviewed in P: not by P's own `sam`, who shares the delegator's name (P has no lead: the operators).
    const claimed = handoffOf(await client.claim(P, { handoff_id: 'x-1', idempotency_key: 'x-1-claim' }, as('bob')));
    const returned = handoffOf(await client.return(P, { handoff_id: 'x-1', claim_id: claimed.claim_id!, report, idempotency_key: 'x-1-ret' }, as('bob')));
    expect(returned).toMatchObject({ status: 'returned', handback_recipient: { to_role: 'operator', reason: 'no_eligible_reviewer' } });
  });

  it('cross-project: its delegator withdraws it from its own subject (target_project); P`s own sam, another SRC agent and an id P made are refused', async () => {
    await publishDefinition(nats, prefix, definition(P, ['alice', 'bob', 'rita', 'sam'], [SRC]));
    const id = 'x-ab-1';
    const body = { handoff_id: id, project: SRC, from_agent: 'sam', to_agent: 'bob', summary: 'help', target_project: P, cto_override: 'dec-1' };
    handoffOf(await client.create(SRC, { ...body, idempotency_key: `${id}-c` }, asInSrc('sam')));
    handoffOf(await client.claim(P, { handoff_id: id, idempotency_key: `${id}-claim` }, as('bob')));

    // Without target_project the source project holds no such handoff (nothing moves in P).
    expect(await client.abandon(SRC, { handoff_id: id, reason: 'not needed', idempotency_key: 'ab-0' }, asInSrc('sam'))).toMatchObject({
      ok: false,
      error: { code: 'not_found' },
    });
    // P's own sam shares the delegator's name and is someone else.
    expect(await client.abandon(P, { handoff_id: id, reason: 'not needed', idempotency_key: 'ab-1' }, as('sam'))).toMatchObject({
      ok: false,
      error: { code: 'not_the_delegator', kind: 'forbidden', details: { delegator: 'sam', delegator_project: SRC } },
    });
    // A handoff P made itself is not reachable from SRC: answered as an id that does not exist.
    const local = handoffOf(await create('bob'));
    const probe = await client.abandon(SRC, { handoff_id: local.id, reason: 'x', idempotency_key: 'ab-2', target_project: P }, asInSrc('sam'));
    const none = await client.abandon(SRC, { handoff_id: 'no-such', reason: 'x', idempotency_key: 'ab-3', target_project: P }, asInSrc('sam'));
    expect(probe).toMatchObject({ ok: false, error: { code: 'not_found', kind: 'not_found' } });
    expect(probe.ok === false && none.ok === false && probe.error.message.replace(local.id, '<id>')).toBe(
      none.ok === false && none.error.message.replace('no-such', '<id>'),
    );

    // Another agent of SRC did not delegate it.
    expect(await client.abandon(SRC, { handoff_id: id, reason: 'x', idempotency_key: 'ab-5', target_project: P }, asInSrc('tom'))).toMatchObject({
      ok: false,
      error: { code: 'not_the_delegator' },
    });

    const withdrawn = await client.abandon(SRC, { handoff_id: id, reason: 'not needed', idempotency_key: 'ab-4', target_project: P }, asInSrc('sam'));
    expect(handoffOf(withdrawn)).toMatchObject({ id, project: P, source_project: SRC, status: 'abandoned' });
    // A retry is answered with the record and stores nothing; the same key with another reason is refused.
    expect(await client.abandon(SRC, { handoff_id: id, reason: 'not needed', idempotency_key: 'ab-4', target_project: P }, asInSrc('sam'))).toMatchObject({
      ok: true,
      events: 0,
      handoff: { status: 'abandoned' },
    });
    expect(await client.abandon(SRC, { handoff_id: id, reason: 'other', idempotency_key: 'ab-4', target_project: P }, asInSrc('sam'))).toMatchObject({
      ok: false,
      error: { code: 'idempotency_key_reused' },
    });
    // P's own sam sending the delegator's key and body is decided as any request: the key is SRC's sam's.
    expect(await client.abandon(P, { handoff_id: id, reason: 'not needed', idempotency_key: 'ab-4' }, as('sam'))).toMatchObject({
      ok: false,
      error: { code: 'handoff_not_open' },
    });
    // Another SRC agent learns nothing of its state: it is not its delegator.
    expect(await client.abandon(SRC, { handoff_id: id, reason: 'x', idempotency_key: 'ab-6', target_project: P }, asInSrc('tom'))).toMatchObject({
      ok: false,
      error: { code: 'not_the_delegator' },
    });
    const abandoned = (await store.read({ project: P, kind: 'handoff', id })).events.filter((e) => e.type === 'handoff.abandoned');
    expect(abandoned.map((e) => e.payload)).toEqual([expect.objectContaining({ abandoned_by: 'sam', abandoned_by_project: SRC, reason: 'not needed' })]);
    expect(abandoned[0]).toMatchObject({ project: P, actor: 'sam', origin: 'agent' });
  });

  it('deadline: expire_deadline past deadline_at fails the handoff once (terminal_reason deadline)', async () => {
    const h = handoffOf(await create('bob', { deadline_at: new Date(Date.now() - 1000).toISOString() }));
    const wd = callers.watchdog;
    const first = await client.send(P, 'expire_deadline', { handoff_id: h.id, idempotency_key: `deadline:${h.id}` }, wd);
    expect(handoffOf(first)).toMatchObject({ status: 'failed', terminal_reason: 'deadline' });
    const again = await client.send(P, 'expire_deadline', { handoff_id: h.id, idempotency_key: 'another-watchdog' }, wd);
    expect(again).toMatchObject({ ok: false, error: { code: 'handoff_not_open' } });
    const events = (await store.read({ project: P, kind: 'handoff', id: h.id })).events;
    expect(events.filter((e) => e.type === 'handoff.deadline_expired')).toHaveLength(1);
  });
});
