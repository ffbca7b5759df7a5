import { AckPolicy } from 'nats';
import {
  createEventRegistry,
  ledgerCommandSubject,
  legacyOfferDurableName,
  offerDurableName,
  Principals,
  type CompletionReport,
  type HandoffRecord,
  type LedgerCommandName,
  type LedgerReply,
  type Principal,
} from '@baton/contracts';
import { batonStreamNames, JetStreamEventStore, LedgerClient, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
import {
  agentsOf,
  bootLedger,
  callers,
  connectTest,
  deadLetters,
  deleteStreams,
  DlqHeader,
  publishDefinition,
  randomPrefix,
  type StoredMessage,
} from './int/support';

/*
 * Issue 11: the ledger takes identity from the subject, never from the body. Every command subject
 * names its caller (`<prefix>.cmd.ledger.<project>.<kind>.<name>.<command>`; the NATS server lets a
 * principal publish only its own); a body may repeat that identity but never claim another
 * (`identity_mismatch`), and the command table says who may send what (`principal_not_allowed`).
 * Both refusals are answered with kind `forbidden` and recorded as dead letters; the ledger keeps
 * serving.
 */

const P = 'idp';
const as = agentsOf(P);
const encoder = new TextEncoder();
const decoder = new TextDecoder();

const report: CompletionReport = {
  summary: 'did it',
  files_changed: [],
  verification: 'npm test',
  next_steps: '',
  outcome: 'completed',
  evidence: { tests_run: ['x.spec.ts: 1 passed'] },
};

/** A well-formed body for every ledger command (so the only thing wrong with a forged one is who it claims to be). */
function validBody(command: LedgerCommandName, key: string): Record<string, unknown> {
  const h = { handoff_id: 'h-forged', idempotency_key: key };
  switch (command) {
    case 'create':
      return { ...h, project: P, from_agent: 'mallory', to_agent: 'bob', summary: 'work' };
    case 'claim':
      return h;
    case 'heartbeat':
      return { ...h, claim_id: 'c-1' };
    case 'return':
      return { ...h, claim_id: 'c-1', report };
    case 'decide_handback':
      return { ...h, decision: 'accept' };
    case 'release':
    case 'abandon':
    case 'fail':
      return { ...h, reason: 'because' };
    case 'archive':
      return h;
    case 'requeue_expired':
      return { ...h, claim_id: 'c-1' };
    case 'complete_from_result':
      return { ...h, result_id: 'r-1', agent: 'mallory' };
    case 'expire_deadline':
      return h;
    case 'give_up_offer':
      return { ...h, deliveries: 5, reason: 'the handler kept failing' };
    case 'pause':
      return { reason: 'forged', idempotency_key: key };
    case 'resume':
      return { idempotency_key: key };
    case 'open_offers':
      return { ack_wait_ms: 10_000 + key.length };
    case 'complete_then_create':
      return { complete: validBody('complete_from_result', `${key}-c`), create: validBody('create', `${key}-n`) };
    default: {
      const never: never = command;
      throw new Error(`no body for ${String(never)}`);
    }
  }
}

const COMMANDS: LedgerCommandName[] = [
  'create',
  'claim',
  'heartbeat',
  'return',
  'decide_handback',
  'release',
  'abandon',
  'fail',
  'archive',
  'requeue_expired',
  'complete_from_result',
  'expire_deadline',
  'give_up_offer',
  'pause',
  'resume',
  'open_offers',
  'complete_then_create',
];

/** What a forged body claims, on the subject of agent `mallory`. */
const FORGERIES: Array<[string, Record<string, unknown>]> = [
  ['another actor', { actor: 'alice' }],
  ['actor_kind operator', { actor_kind: 'operator' }],
  ['actor_kind system', { actor: 'mallory', actor_kind: 'system' }],
  ['actor_role admin', { actor_role: 'admin' }],
];

type Reply = { ok: boolean; error?: { code: string; kind: string; message: string }; handoff?: HandoffRecord; stream?: string; durable?: string };

describe('ledger identity (real NATS): the subject names the caller; the body never speaks for it', () => {
  const prefix = randomPrefix();
  let nats: NatsHandle;
  let ledger: RunningService;
  let client: LedgerClient;
  let store: JetStreamEventStore;

  async function send(
    principal: Principal,
    command: string,
    body: Record<string, unknown>,
    project = P,
  ): Promise<{ reply: Reply; subject: string; bytes: Uint8Array }> {
    const subject = ledgerCommandSubject(prefix, project, principal, command);
    const bytes = encoder.encode(JSON.stringify(body));
    const msg = await nats.connection.request(subject, bytes, { timeout: 5000 });
    return { reply: JSON.parse(decoder.decode(msg.data)) as Reply, subject, bytes };
  }

  /** The dead letter holding exactly `bytes`. */
  function letterOf(letters: StoredMessage[], bytes: Uint8Array): StoredMessage | undefined {
    return letters.find((m) => Buffer.from(m.data).equals(Buffer.from(bytes)));
  }

  async function lettersFor(all: Array<{ bytes: Uint8Array }>): Promise<StoredMessage[]> {
    return waitFor(
      async () => {
        const letters = await deadLetters(nats, prefix, 'ledger');
        return all.every(({ bytes }) => letterOf(letters, bytes) !== undefined) ? letters : undefined;
      },
      `${all.length} dead letters`,
      { timeoutMs: 8000 },
    );
  }

  beforeAll(async () => {
    nats = await connectTest();
    // Every refusal's own letter is what these tests read: no cap on letters (it has its own tests).
    ledger = await bootLedger(prefix, 'ledger-identity', { LEDGER_DEFINITION_TTL_MS: '0', BATON_REFUSED_LETTERS_PER_MINUTE: '0' });
    await publishDefinition(nats, prefix, {
      project: P,
      lead: 'lena',
      agents: [{ name: 'alice' }, { name: 'bob' }, { name: 'lena' }, { name: 'mallory' }],
      workflows: [],
    } as never);
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

  it('every command: a body on an agent subject that names another actor, claims kind operator or system, or a role is refused with identity_mismatch (forbidden) and recorded as a dead letter', async () => {
    const sent: Array<{ command: string; forgery: string; reply: Reply; subject: string; bytes: Uint8Array }> = [];
    for (const command of COMMANDS) {
      for (const [forgery, claims] of FORGERIES) {
        const body = { ...validBody(command, `${command}-${forgery.replace(/\W+/g, '-')}`), ...claims };
        sent.push({ command, forgery, ...(await send(Principals.agent(P, 'mallory'), command, body)) });
      }
    }
    for (const { command, forgery, reply } of sent) {
      expect({ command, forgery, reply }).toMatchObject({ command, forgery, reply: { ok: false, error: { code: 'identity_mismatch', kind: 'forbidden' } } });
    }
    const letters = await lettersFor(sent);
    for (const { command, forgery, subject, bytes } of sent) {
      const letter = letterOf(letters, bytes);
      expect({ command, forgery, reason: letter?.header(DlqHeader.reason), subject: letter?.header(DlqHeader.subject) }).toEqual({
        command,
        forgery,
        reason: 'identity_mismatch',
        subject,
      });
    }
    // Nothing was decided: no handoff, no pause.
    expect((await store.read({ project: P, kind: 'handoff', id: 'h-forged' })).events).toHaveLength(0);
    expect((await store.read({ project: P, kind: 'project', id: 'control' })).events).toHaveLength(0);
  });

  it('a service subject may not speak for anyone else either: the router naming an agent, the watchdog claiming to be an operator', async () => {
    const router = await send(Principals.service('router'), 'create', { ...validBody('create', 'svc-forge-1'), actor: 'alice', actor_kind: 'agent' });
    const watchdog = await send(Principals.service('watchdog'), 'requeue_expired', { ...validBody('requeue_expired', 'svc-forge-2'), actor_kind: 'operator' });
    for (const { reply } of [router, watchdog]) expect(reply).toMatchObject({ ok: false, error: { code: 'identity_mismatch', kind: 'forbidden' } });
    await lettersFor([router, watchdog]);
  });

  it('an agent may not send complete_from_result, requeue_expired, expire_deadline, pause or resume (principal_not_allowed, recorded), even with an honest body', async () => {
    const sent = [];
    for (const command of ['complete_from_result', 'requeue_expired', 'expire_deadline', 'pause', 'resume'] as const) {
      sent.push({ command, ...(await send(Principals.agent(P, 'mallory'), command, validBody(command, `agent-${command}`))) });
    }
    for (const { command, reply } of sent) {
      expect({ command, reply }).toMatchObject({ command, reply: { ok: false, error: { code: 'principal_not_allowed', kind: 'forbidden' } } });
    }
    const letters = await lettersFor(sent);
    for (const { bytes } of sent) expect(letterOf(letters, bytes)?.header(DlqHeader.reason)).toBe('principal_not_allowed');
    // Nor may a service send what belongs to another: the watchdog closing a result, the router requeueing.
    expect((await send(Principals.service('watchdog'), 'complete_from_result', validBody('complete_from_result', 'wd-cfr'))).reply).toMatchObject({
      error: { code: 'principal_not_allowed' },
    });
    expect((await send(Principals.service('router'), 'requeue_expired', validBody('requeue_expired', 'rt-rq'))).reply).toMatchObject({
      error: { code: 'principal_not_allowed' },
    });
    // An agent asks open_offers; a service may not.
    expect((await send(Principals.service('router'), 'open_offers', {})).reply).toMatchObject({ error: { code: 'principal_not_allowed' } });
  });

  it('kill switch: op.notifier relaying an operator or viewer cannot pause; relaying an admin can; op.admin can; the notifier must name the operator and role', async () => {
    const notifier = Principals.operator('notifier');
    const asOperator = await send(notifier, 'pause', { actor: 'olga', actor_role: 'operator', reason: 'x', idempotency_key: 'p-op' });
    expect(asOperator.reply).toMatchObject({ ok: false, error: { code: 'principal_not_allowed', kind: 'forbidden' } });
    expect((await send(notifier, 'pause', { actor: 'vic', actor_role: 'viewer', reason: 'x', idempotency_key: 'p-viewer' })).reply).toMatchObject({
      error: { code: 'principal_not_allowed' },
    });
    const anonymous = await send(notifier, 'pause', { actor_role: 'admin', reason: 'x', idempotency_key: 'p-anon' });
    expect(anonymous.reply).toMatchObject({ ok: false, error: { code: 'schema_violation', kind: 'rejected' } });
    expect((await send(notifier, 'pause', { actor: 'olga', reason: 'x', idempotency_key: 'p-norole' })).reply).toMatchObject({
      error: { code: 'schema_violation' },
    });
    expect(
      (await send(notifier, 'pause', { actor: 'olga', actor_role: 'admin', actor_kind: 'system', reason: 'x', idempotency_key: 'p-kind' })).reply,
    ).toMatchObject({
      error: { code: 'identity_mismatch' },
    });
    await lettersFor([asOperator, anonymous]);

    const paused = await client.pause(P, { reason: 'incident 11', idempotency_key: 'p-admin' }, callers.operator('ada', 'admin'));
    expect(paused).toMatchObject({ ok: true, project: { status: 'paused', paused_by: 'ada' } });
    const resumed = await client.resume(P, { idempotency_key: 'r-admin' }, callers.admin('sre-sam'));
    expect(resumed).toMatchObject({ ok: true, project: { status: 'active' } });
    // op.admin is admin by its connection: it may name nobody (then `admin`), never another role.
    expect(await client.pause(P, { reason: 'drill', idempotency_key: 'p-cli' }, callers.admin())).toMatchObject({ ok: true, project: { paused_by: 'admin' } });
    expect((await send(Principals.operator('admin'), 'resume', { actor_role: 'operator', idempotency_key: 'r-role' })).reply).toMatchObject({
      error: { code: 'identity_mismatch' },
    });
    expect(await client.resume(P, { idempotency_key: 'r-cli' }, callers.admin())).toMatchObject({ ok: true, project: { status: 'active' } });
    const events = (await store.read({ project: P, kind: 'project', id: 'control' })).events;
    // The notifier's person is an identity (its token): the actor. The admin connection is the actor
    // of what it sends; the person it names is a claim beside it (on_behalf_of).
    expect(events.map((e) => [e.type, e.actor, (e.payload as { on_behalf_of?: string }).on_behalf_of])).toEqual([
      ['project.paused', 'ada', undefined],
      ['project.resumed', 'admin', 'sre-sam'],
      ['project.paused', 'admin', undefined],
      ['project.resumed', 'admin', undefined],
    ]);
  });

  it('the admin connection is the actor of pause and resume, whoever its body names: the named person is on_behalf_of, a claim; on a handoff command a named person is refused identity_mismatch', async () => {
    const project = 'idp-obo';
    // mallory holds no admin token: naming her makes her nothing but the claim she is.
    const paused = await client.pause(project, { reason: 'incident 12', idempotency_key: 'obo-p', force: true }, callers.admin('mallory'));
    expect(paused).toMatchObject({ ok: true, project: { status: 'paused', paused_by: 'admin', on_behalf_of: 'mallory' } });
    // The same key sent for another person is not a retry of mallory's.
    expect(await client.pause(project, { reason: 'incident 12', idempotency_key: 'obo-p', force: true }, callers.admin('olga'))).toMatchObject({
      ok: false,
      error: { code: 'idempotency_key_reused' },
    });
    expect(await client.pause(project, { reason: 'incident 12', idempotency_key: 'obo-p', force: true }, callers.admin('mallory'))).toMatchObject({
      ok: true,
      events: 0,
    });
    expect(await client.resume(project, { idempotency_key: 'obo-r' }, callers.admin('mallory'))).toMatchObject({ ok: true, project: { status: 'active' } });
    const events = (await store.read({ project, kind: 'project', id: 'control' })).events;
    expect(
      events.map((e) => {
        const d = e.payload as { paused_by?: string; resumed_by?: string; on_behalf_of?: string };
        return [e.type, e.actor, e.origin, d.paused_by ?? d.resumed_by, d.on_behalf_of];
      }),
    ).toEqual([
      ['project.paused', 'admin', 'operator', 'admin', 'mallory'],
      ['project.resumed', 'admin', 'operator', 'admin', 'mallory'],
    ]);
    // A handoff command's events have no place for the claim: naming a person there is refused, recorded.
    const claimed = await send(Principals.operator('admin'), 'claim', { handoff_id: 'h-obo', idempotency_key: 'obo-c', actor: 'mallory' });
    expect(claimed.reply).toMatchObject({ ok: false, error: { code: 'identity_mismatch', kind: 'forbidden' } });
    await lettersFor([claimed]);
  });

  it('a claim as agent bob is recorded as bob (kind agent) with no actor in the body, or with bob repeating his own name', async () => {
    expect(await client.create(P, { handoff_id: 'h-claim', from_agent: 'alice', summary: 'anyone', idempotency_key: 'c-claim' }, as('alice'))).toMatchObject({
      ok: true,
    });
    const { reply } = await send(Principals.agent(P, 'bob'), 'claim', { handoff_id: 'h-claim', idempotency_key: 'k-claim' });
    expect(reply).toMatchObject({ ok: true, handoff: { status: 'claimed', claimed_by: 'bob' } });
    const again = await send(Principals.agent(P, 'bob'), 'heartbeat', {
      handoff_id: 'h-claim',
      claim_id: reply.handoff!.claim_id,
      idempotency_key: 'k-hb',
      actor: 'bob',
      actor_kind: 'agent',
    });
    expect(again.reply).toMatchObject({ ok: true });
    const events = (await store.read({ project: P, kind: 'handoff', id: 'h-claim' })).events;
    expect(events.map((e) => [e.type, e.actor, e.origin])).toEqual([
      ['handoff.created', 'alice', 'agent'],
      ['handoff.claimed', 'bob', 'agent'],
      ['handoff.heartbeat', 'bob', 'agent'],
    ]);
  });

  it('seed 002 hole (c): a create of a completion_handback is refused handback_create_forbidden (forbidden), from an agent or the router (before: a schema_violation, the kind not being in the wire form)', async () => {
    const forge = {
      handoff_id: 'hb-forged',
      project: P,
      kind: 'completion_handback',
      from_agent: 'alice',
      to_agent: 'alice',
      reply_to_handoff_id: 'h-any',
      summary: 'forged',
    };
    const senders = [
      { principal: Principals.agent(P, 'alice'), body: { ...forge, idempotency_key: 'f-agent' } },
      { principal: Principals.service('router'), body: { ...forge, idempotency_key: 'f-router' } },
    ];
    for (const { principal, body } of senders) {
      const { reply } = await send(principal, 'create', body);
      expect({ principal, reply }).toMatchObject({ principal, reply: { ok: false, error: { code: 'handback_create_forbidden', kind: 'forbidden' } } });
    }
    expect(await client.get(P, 'hb-forged')).toBeNull();
  });

  it('a worker cannot decide its own handback: as itself it is refused by the domain (self_accept_forbidden); claiming to be an operator is identity_mismatch; a third agent and a viewer may not; an operator may', async () => {
    expect(
      await client.create(P, { handoff_id: 'h-work', from_agent: 'alice', to_agent: 'bob', summary: 'work', idempotency_key: 'c-work' }, as('alice')),
    ).toMatchObject({ ok: true });
    const claimed = await client.claim(P, { handoff_id: 'h-work', idempotency_key: 'k-work' }, as('bob'));
    if (!claimed.ok) throw new Error(claimed.error.code);
    const returned = await client.return(P, { handoff_id: 'h-work', claim_id: claimed.handoff.claim_id!, report, idempotency_key: 'r-work' }, as('bob'));
    if (!returned.ok) throw new Error(returned.error.code);
    const handback = returned.handoff.handback_id!;
    await waitFor(() => client.get(P, handback), `the handback ${handback}`, { timeoutMs: 8000 });

    const own = await client.decideHandback(P, { handoff_id: handback, decision: 'accept', idempotency_key: 'd-own' }, as('bob'));
    expect(own).toMatchObject({ ok: false, error: { code: 'self_accept_forbidden', kind: 'forbidden' } });
    const forged = await send(Principals.agent(P, 'bob'), 'decide_handback', {
      handoff_id: handback,
      decision: 'accept',
      idempotency_key: 'd-forged',
      actor: 'olga',
      actor_kind: 'operator',
    });
    expect(forged.reply).toMatchObject({ ok: false, error: { code: 'identity_mismatch' } });
    // A third agent is not the addressee (the handback goes to the delegator).
    expect(await client.decideHandback(P, { handoff_id: handback, decision: 'accept', idempotency_key: 'd-mallory' }, as('mallory'))).toMatchObject({
      ok: false,
      error: { code: 'not_the_addressee' },
    });
    // A viewer token relayed by the notifier may not act at all.
    expect(
      await client.decideHandback(P, { handoff_id: handback, decision: 'accept', idempotency_key: 'd-viewer' }, callers.operator('vic', 'viewer')),
    ).toMatchObject({
      ok: false,
      error: { code: 'principal_not_allowed' },
    });
    const reworked = await client.decideHandback(
      P,
      { handoff_id: handback, decision: 'rework', note: 'tests please', idempotency_key: 'd-olga' },
      callers.operator('olga'),
    );
    expect(reworked).toMatchObject({ ok: true, handoff: { status: 'completed' } });
    const decided = (await store.read({ project: P, kind: 'handoff', id: handback })).events.find((e) => e.type === 'handoff.handback_decided');
    expect(decided?.payload).toMatchObject({ decided_by: 'olga', decided_by_kind: 'operator' });
    expect((await client.get(P, 'h-work'))?.status).toBe('pending');
  });

  it('the worker is the principal that claimed the work, kind and name: a person whose token is named like the worker agent may decide its handback; the agent itself still may not', async () => {
    expect(
      await client.create(P, { handoff_id: 'h-named', from_agent: 'alice', to_agent: 'bob', summary: 'work', idempotency_key: 'c-named' }, as('alice')),
    ).toMatchObject({ ok: true });
    const claimed = await client.claim(P, { handoff_id: 'h-named', idempotency_key: 'k-named' }, as('bob'));
    if (!claimed.ok) throw new Error(claimed.error.code);
    const returned = await client.return(P, { handoff_id: 'h-named', claim_id: claimed.handoff.claim_id!, report, idempotency_key: 'r-named' }, as('bob'));
    if (!returned.ok) throw new Error(returned.error.code);
    const handback = returned.handoff.handback_id!;
    const record = await waitFor(() => client.get(P, handback), `the handback ${handback}`, { timeoutMs: 8000 });
    // The kind comes from the connections that claimed and returned, recorded on the events.
    expect(record).toMatchObject({ reviewed_worker: 'bob', reviewed_worker_kind: 'agent' });
    const parent = (await store.read({ project: P, kind: 'handoff', id: 'h-named' })).events;
    expect(parent.find((e) => e.type === 'handoff.claimed')?.payload).toMatchObject({ claimed_by: 'bob', claimed_by_kind: 'agent' });
    expect(parent.find((e) => e.type === 'handoff.returned')?.payload).toMatchObject({ worker: 'bob', worker_kind: 'agent' });

    expect(await client.decideHandback(P, { handoff_id: handback, decision: 'accept', idempotency_key: 'd-named-own' }, as('bob'))).toMatchObject({
      ok: false,
      error: { code: 'self_accept_forbidden' },
    });
    // bob the person (an operator token named bob, relayed by the notifier) is not bob the agent.
    const person = await client.decideHandback(P, { handoff_id: handback, decision: 'accept', idempotency_key: 'd-named-person' }, callers.operator('bob'));
    expect(person).toMatchObject({ ok: true, handoff: { status: 'completed' } });
    const decided = (await store.read({ project: P, kind: 'handoff', id: handback })).events.find((e) => e.type === 'handoff.handback_decided');
    expect(decided?.payload).toMatchObject({ decided_by: 'bob', decided_by_kind: 'operator', decision: 'accept' });
    await waitFor(async () => ((await client.get(P, 'h-named'))?.status === 'completed' ? true : undefined), 'the parent completed by the accept', {
      timeoutMs: 8000,
    });
  });

  it('open_offers provisions offers-<n>-<project>-<agent> on the inbox stream, filtered to the SUBJECT agent`s offers, idempotently; a foreign filter is replaced', async () => {
    const inbox = batonStreamNames(prefix).inbox;
    const durable = offerDurableName(P, 'bob');
    // A durable of that name made by someone else, reading alice's offers.
    await nats.jsm.consumers.add(inbox, { durable_name: durable, filter_subject: `${prefix}.in.${P}.offer.alice`, ack_policy: AckPolicy.Explicit });
    const first = await client.openOffers(P, { ack_wait_ms: 20_000 }, as('bob'));
    expect(first).toEqual({ ok: true, stream: inbox, durable });
    const info = await nats.jsm.consumers.info(inbox, durable);
    expect(info.config).toMatchObject({ filter_subject: `${prefix}.in.${P}.offer.bob`, ack_wait: 20_000 * 1_000_000, durable_name: durable });
    // Unused for longer than the inbox keeps an offer (and a day), the server deletes it: a returning agent's new one delivers the same.
    const inboxMaxAge = (await nats.jsm.streams.info(inbox)).config.max_age;
    expect(inboxMaxAge).toBeGreaterThan(0);
    expect(info.config.inactive_threshold).toBe(inboxMaxAge + 24 * 60 * 60 * 1_000 * 1_000_000);
    // Again (another replica): the same durable, nothing new.
    expect(await client.openOffers(P, { ack_wait_ms: 20_000 }, as('bob'))).toEqual(first);
    expect((await nats.jsm.consumers.info(inbox, durable)).created).toBe(info.created);
    // A replica that asks no ack wait keeps the one asked before (it used to reset it to the default for every replica).
    expect(await client.openOffers(P, {}, as('bob'))).toEqual(first);
    expect((await nats.jsm.consumers.info(inbox, durable)).config.ack_wait).toBe(20_000 * 1_000_000);
    // A durable an earlier ledger made, kept for good, gets the threshold in place (same cursor, same creation).
    const gina = offerDurableName(P, 'gina');
    await nats.jsm.consumers.add(inbox, { durable_name: gina, filter_subject: `${prefix}.in.${P}.offer.gina`, ack_policy: AckPolicy.Explicit });
    const before = await nats.jsm.consumers.info(inbox, gina);
    expect(before.config.inactive_threshold ?? 0).toBe(0);
    expect(await client.openOffers(P, {}, as('gina'))).toEqual({ ok: true, stream: inbox, durable: gina });
    const after = await nats.jsm.consumers.info(inbox, gina);
    expect([after.created, after.config.inactive_threshold]).toEqual([before.created, info.config.inactive_threshold]);
    // The body cannot widen the filter or name another agent; the ack wait is bounded.
    expect((await send(Principals.agent(P, 'bob'), 'open_offers', { filter_subject: `${prefix}.in.>` })).reply).toMatchObject({
      error: { code: 'schema_violation' },
    });
    expect((await send(Principals.agent(P, 'bob'), 'open_offers', { actor: 'alice' })).reply).toMatchObject({ error: { code: 'identity_mismatch' } });
    expect(await client.openOffers(P, { ack_wait_ms: 10 }, as('bob'))).toMatchObject({ ok: false, error: { code: 'schema_violation' } });
    // The client will not send an agent's command to another project.
    expect(await client.openOffers('elsewhere', {}, as('bob'))).toMatchObject({ ok: false, error: { code: 'principal_not_allowed' } });
  });

  it("one agent's offers durable is its own: agent c of project a-b and agent b-c of project a get two (one name before); a durable under the former name with the agent's filter is moved to the new name", async () => {
    expect(offerDurableName('a-b', 'c')).not.toBe(offerDurableName('a', 'b-c'));
    expect(legacyOfferDurableName('a-b', 'c')).toBe(legacyOfferDurableName('a', 'b-c'));
    const inbox = batonStreamNames(prefix).inbox;
    const legacy = legacyOfferDurableName(P, 'carol');
    await nats.jsm.consumers.add(inbox, { durable_name: legacy, filter_subject: `${prefix}.in.${P}.offer.carol`, ack_policy: AckPolicy.Explicit });
    const opened = await client.openOffers(P, {}, as('carol'));
    expect(opened).toEqual({ ok: true, stream: inbox, durable: offerDurableName(P, 'carol') });
    expect((await nats.jsm.consumers.info(inbox, offerDurableName(P, 'carol'))).config.filter_subject).toBe(`${prefix}.in.${P}.offer.carol`);
    await expect(nats.jsm.consumers.info(inbox, legacy)).rejects.toThrow();
    // A former-name durable with another agent's filter is not this agent's: left alone.
    const other = legacyOfferDurableName(P, 'dave');
    await nats.jsm.consumers.add(inbox, { durable_name: other, filter_subject: `${prefix}.in.${P}.offer.erin`, ack_policy: AckPolicy.Explicit });
    expect(await client.openOffers(P, {}, as('dave'))).toMatchObject({ ok: true, durable: offerDurableName(P, 'dave') });
    expect((await nats.jsm.consumers.info(inbox, other)).config.filter_subject).toBe(`${prefix}.in.${P}.offer.erin`);
  });

  it('seed 002 hole (a): a worker\'s return with no evidence and "actor_kind":"operator" in its body is refused; floor applicability is keyed on the connection, so the honest return is floored', async () => {
    expect(
      await client.create(P, { handoff_id: 'h-floor', from_agent: 'alice', to_agent: 'bob', summary: 'ship it', idempotency_key: 'c-floor' }, as('alice')),
    ).toMatchObject({ ok: true });
    const claimed = await client.claim(P, { handoff_id: 'h-floor', idempotency_key: 'k-floor' }, as('bob'));
    if (!claimed.ok) throw new Error(claimed.error.code);
    const bare = { summary: 'done', files_changed: [], verification: '', next_steps: '', outcome: 'completed', evidence: {} };
    // Exactly what the outside suite sent: the worker claims to be an operator to escape the floor.
    const forged = await send(Principals.agent(P, 'bob'), 'return', {
      handoff_id: 'h-floor',
      claim_id: claimed.handoff.claim_id,
      idempotency_key: 'r-floor-forged',
      report: bare,
      actor_kind: 'operator',
    });
    expect(forged.reply).toMatchObject({ ok: false, error: { code: 'identity_mismatch', kind: 'forbidden' } });
    expect((await client.get(P, 'h-floor'))?.status).toBe('claimed');
    // The same return without the claim: the worker is an agent, so the evidence floor applies.
    const honest = await send(Principals.agent(P, 'bob'), 'return', {
      handoff_id: 'h-floor',
      claim_id: claimed.handoff.claim_id,
      idempotency_key: 'r-floor',
      report: bare,
    });
    expect(honest.reply).toMatchObject({ ok: true, handoff: { status: 'returned' } });
    const returned = (await store.read({ project: P, kind: 'handoff', id: 'h-floor' })).events.find((e) => e.type === 'handoff.returned');
    expect(returned?.payload).toMatchObject({ evidence_floor: { applied: true, original_outcome: 'completed' } });
  });

  it('after all of that the ledger is still serving: a normal create and claim succeed', async () => {
    expect(
      await client.create(P, { handoff_id: 'h-after', from_agent: 'alice', summary: 'still here', idempotency_key: 'c-after' }, as('alice')),
    ).toMatchObject({ ok: true });
    const reply: LedgerReply = await client.claim(P, { handoff_id: 'h-after', idempotency_key: 'k-after' }, as('lena'));
    expect(reply).toMatchObject({ ok: true, handoff: { status: 'claimed', claimed_by: 'lena' } });
  });
});
