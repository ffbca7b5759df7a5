import { randomBytes } from 'node:crypto';
import { createEventRegistry, type EventEnvelope, type LedgerReply } from '@baton/contracts';
import { JetStreamEventStore, LedgerClient, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { agentsOf, bootLedger, callers, connectTest, deleteStreams, offers, publishDefinition, randomPrefix } from './int/support';

/*
 * An agent names a run (`workflow_run_id`) in a create only while that run waits for it: the ledger
 * reads the run (the router's aggregate) and the decider refuses `not_in_run` otherwise. A security
 * audit's second form of the circuit attack: an agent created a handoff to itself naming another
 * agent's run, claimed and failed it three times, and its circuit's opening stopped that run.
 * (Through the router and the watchdog: apps/router/src/run-part.int-spec.ts.)
 */

const P = 'shop';
const OTHER = 'partner';
const as = agentsOf(P);

describe('ledger: a create names a run only while the run waits for its sender (real NATS)', () => {
  const prefix = randomPrefix();
  let nats: NatsHandle;
  let ledger: RunningService;
  let client: LedgerClient;
  let store: JetStreamEventStore;
  let n = 0;

  /** Append run events as the router would (after the run's last event). */
  const appendRun = async (project: string, run: string, type: string, payload: unknown) => {
    const ref = { project, kind: 'run' as const, id: run };
    const { lastSeq } = await store.read(ref);
    const envelope: EventEnvelope = {
      id: `ev-${randomBytes(6).toString('hex')}`,
      type,
      version: 1,
      aggregate: { kind: 'run', id: run },
      project,
      occurredAt: new Date().toISOString(),
      actor: 'baton-router',
      origin: 'agent',
      causationId: null,
      correlationId: run,
      payload,
    };
    await store.append(ref, [envelope], { expectedVersion: lastSeq });
  };
  /** The run routed to `agent` (its hop `hop`). */
  const routeTo = (run: string, agent: string, hop: number, project = P) =>
    appendRun(project, run, 'run.routed', {
      decision: {
        rule: 'task',
        dispatch: { status: 'advance', reason: null, origin: 'agent' },
        callback_after: null,
        outcome: 'dispatch',
        target: { agent, step: 's' },
      },
      target: { agent, step: 's' },
      from: null,
      handoff_id: `ho-s-${run}-${hop}`,
      hop,
      cause: { kind: 'result', id: `res-${run}-${hop}` },
      routed_at: new Date().toISOString(),
    });
  const create = (agent: string, run: string | undefined, extra: Record<string, unknown> = {}, id = `h-${++n}`) =>
    client.create(
      P,
      {
        handoff_id: id,
        from_agent: agent,
        to_agent: agent,
        summary: 'a piece of the work',
        max_retries: 0,
        ...(run ? { workflow_run_id: run } : {}),
        idempotency_key: `create-${id}`,
        ...extra,
      },
      as(agent),
    );
  const refusalOf = (reply: LedgerReply) => (reply.ok ? `stored ${reply.handoff.id}` : reply.error);
  const stored = async (id: string, project = P) => (await store.read({ project, kind: 'handoff', id })).events.length;

  beforeAll(async () => {
    nats = await connectTest();
    ledger = await bootLedger(prefix, 'ledger-a');
    for (const project of [P, OTHER]) {
      await publishDefinition(nats, prefix, {
        project,
        agents: [{ name: 'coder' }, { name: 'reviewer' }, { name: 'helper' }],
        workflows: [],
        ...(project === OTHER ? { accepts_handoffs_from: [P] } : {}),
      });
    }
    client = new LedgerClient(nats, prefix, { timeoutMs: 5000 });
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
  });

  afterAll(async () => {
    await ledger?.stop();
    if (nats) {
      await deleteStreams(nats, prefix);
      await nats.close();
    }
  });

  it("the audit's second form: reviewer's create of a handoff to itself naming coder's run is refused not_in_run (kind forbidden); nothing is stored, nothing offered", async () => {
    await routeTo('wr-victim', 'coder', 1);
    const id = 'h-attack';
    const reply = await create('reviewer', 'wr-victim', {}, id);
    expect(refusalOf(reply)).toMatchObject({ code: 'not_in_run', kind: 'forbidden', details: { workflow_run_id: 'wr-victim', run_project: P } });
    expect(await stored(id)).toBe(0);
    expect((await offers(nats, prefix, P, 'reviewer')).filter((m) => JSON.stringify(m.json()).includes(`"${id}"`))).toEqual([]);
    // Nor can it claim or fail what was never stored.
    expect(refusalOf(await client.claim(P, { handoff_id: id, idempotency_key: `claim-${id}` }, as('reviewer')))).toMatchObject({ code: 'not_found' });
  });

  it('the run`s agent delegates inside its run; the router names any run; a create naming no run is not checked', async () => {
    await routeTo('wr-own', 'coder', 1);
    const delegated = await create('coder', 'wr-own', { to_agent: 'helper' });
    expect(delegated).toMatchObject({ ok: true, handoff: { workflow_run_id: 'wr-own', from_agent: 'coder', to_agent: 'helper' } });
    const routed = await client.create(
      P,
      {
        handoff_id: 'h-routed',
        from_agent: 'coder',
        to_agent: 'reviewer',
        summary: 'route',
        workflow_run_id: 'wr-nobody-started',
        idempotency_key: 'create-h-routed',
      },
      callers.router,
    );
    expect(routed).toMatchObject({ ok: true, handoff: { workflow_run_id: 'wr-nobody-started' } });
    expect(await create('reviewer', undefined)).toMatchObject({ ok: true });
  });

  it('the same answer whether there is no such run, it waits for another, or it ended; once the run moves on its earlier agent is refused, the new one may, and a retry of a create stored before is answered as stored', async () => {
    const noRun = refusalOf(await create('reviewer', 'wr-never'));
    await routeTo('wr-moves', 'coder', 1);
    const first = await create('coder', 'wr-moves', { to_agent: 'helper' }, 'h-first');
    expect(first).toMatchObject({ ok: true });
    const notYet = refusalOf(await create('reviewer', 'wr-moves'));
    expect(notYet).toMatchObject({ code: 'not_in_run' });
    expect({ ...(noRun as object), details: undefined, message: undefined }).toEqual({ ...(notYet as object), details: undefined, message: undefined });

    await routeTo('wr-moves', 'reviewer', 2);
    expect(await create('reviewer', 'wr-moves')).toMatchObject({ ok: true });
    expect(refusalOf(await create('coder', 'wr-moves'))).toMatchObject({ code: 'not_in_run' });
    // coder's retry of what it created while the run waited for it: the stored handoff, as first answered.
    const retry = await client.create(
      P,
      {
        handoff_id: 'h-first',
        from_agent: 'coder',
        to_agent: 'helper',
        summary: 'a piece of the work',
        max_retries: 0,
        workflow_run_id: 'wr-moves',
        idempotency_key: 'create-h-first',
      },
      as('coder'),
    );
    expect(retry).toMatchObject({ ok: true, events: 0, handoff: { id: 'h-first' } });

    await appendRun(P, 'wr-moves', 'run.terminated', { reason: 'operator ended it', origin: 'operator', terminated_at: new Date().toISOString() });
    expect(refusalOf(await create('reviewer', 'wr-moves'))).toMatchObject({ code: 'not_in_run' });
  });

  it('a cross-project create names a run of its SOURCE project: the delegator must be that run`s agent; a run of the same id in the target project does not count', async () => {
    await routeTo('wr-x', 'coder', 1);
    await routeTo('wr-x', 'reviewer', 1, OTHER);
    const cross = (agent: string, id: string) => create(agent, 'wr-x', { to_agent: 'helper', target_project: OTHER, cto_override: 'dec-1' }, id);
    expect(refusalOf(await cross('reviewer', 'hx-attack'))).toMatchObject({ code: 'not_in_run', details: { workflow_run_id: 'wr-x', run_project: P } });
    expect(await stored('hx-attack', OTHER)).toBe(0);
    expect(await cross('coder', 'hx-own')).toMatchObject({ ok: true, handoff: { project: OTHER, source_project: P, workflow_run_id: 'wr-x' } });
  });
});
