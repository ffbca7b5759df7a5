import { randomBytes } from 'node:crypto';
import { createEventRegistry, ledgerCommandSubject, offerDurableName, Principals, ProjectControlReplySchema } from '@baton/contracts';
import { batonStreamNames, connectNats, JetStreamEventStore, LedgerClient, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { createBatonClient, decisions, type BatonAgent, type OfferSubscription } from '@baton/sdk';
import { waitFor } from '@baton/wait';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the two services run in this process (no build needed)
import { startRouter } from '../../apps/router/src/router.app';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the two services run in this process (no build needed)
import { startLedger } from '../../apps/ledger/src/ledger';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the CLI's entry point, called in process
import { main } from '../../apps/cli/src/main';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the CLI's buffered output
import { bufferedIo } from '../../apps/cli/src/output';
import { sleep, twoStepDefinition } from './support';

/*
 * The project kill switch through whole runs (router + ledger in this process, real NATS, agents
 * on the SDK): while a project is paused, runs still start and route and their handoffs are
 * created, but nothing is offered to an agent and a claim is refused; after the resume every held
 * handoff is offered, claimed once, and every run finishes — nothing acknowledged is lost and
 * nothing runs twice.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const encoder = new TextEncoder();
const decoder = new TextDecoder();
const PROJECT = 'ops';

describe('kill switch through whole runs (router + ledger, SDK agents, real NATS)', () => {
  const prefix = `ks${randomBytes(5).toString('hex')}`;
  const env = { ...process.env, NATS_URL, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: 'error' };
  const services: RunningService[] = [];
  const agents: BatonAgent[] = [];
  const subscriptions: OfferSubscription[] = [];
  /** Every offer an agent received, and every claim it won: `<agent>:<handoff id>`. */
  const offered: string[] = [];
  const claimed: string[] = [];
  let nats: NatsHandle;
  let store: JetStreamEventStore;

  /** pause / resume as the admin CLI does (`op.admin`: admin by its connection; the body names the person). */
  const control = async (name: 'pause' | 'resume', body: Record<string, unknown>) => {
    const subject = ledgerCommandSubject(prefix, PROJECT, Principals.operator('admin'), name);
    const reply = await nats.connection.request(subject, encoder.encode(JSON.stringify(body)), { timeout: 5000 });
    return ProjectControlReplySchema.parse(JSON.parse(decoder.decode(reply.data)));
  };
  const runEvents = async (run: string) => (await store.read({ project: PROJECT, kind: 'run', id: run })).events;
  const handoffEvents = async (id: string) => (await store.read({ project: PROJECT, kind: 'handoff', id })).events;

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    services.push(await startLedger(env), await startRouter(env));
    const reply = await nats.connection.request(
      `${prefix}.cmd.router.${PROJECT}.publish_definition`,
      encoder.encode(JSON.stringify(twoStepDefinition(PROJECT))),
      { timeout: 10_000 },
    );
    expect(JSON.parse(decoder.decode(reply.data))).toMatchObject({ ok: true });
    // Two agents doing real work through the SDK: claim, then finish with an advance.
    for (const name of ['issue', 'architect']) {
      const agent = await createBatonClient({ nats, prefix, project: PROJECT, agent: name });
      agents.push(agent);
      subscriptions.push(
        await agent.handoffs({
          concurrency: 4,
          backoffMs: [200, 500],
          onOffer: async (offer) => {
            offered.push(`${name}:${offer.handoffId}`);
            const handoff = await offer.tryClaim();
            if (!handoff) return;
            claimed.push(`${name}:${handoff.id}`);
            await offer.finish({ body: `${name} did it`, decision: decisions.advance() });
          },
          onError: () => undefined,
        }),
      );
    }
  }, 60_000);

  afterAll(async () => {
    for (const subscription of subscriptions) await subscription.stop().catch(() => undefined);
    for (const agent of agents) await agent.close().catch(() => undefined);
    for (const service of services.reverse()) await service.stop().catch(() => undefined);
    const names = batonStreamNames(prefix);
    for (const name of Object.values(names)) await nats.jsm.streams.delete(name).catch(() => undefined);
    await nats.drain();
  }, 30_000);

  it('paused: runs start and route but no agent is offered work and a claim is refused; resumed: every run finishes, each handoff claimed once', async () => {
    // A run before the pause goes straight through.
    const before = `wr-ks-before`;
    await agents[0]!.startRun({ workflow_run_id: before, workflow: 'feature', started_by: 'sam', input: 'x' });
    await waitFor(async () => ((await runEvents(before)).some((e) => e.type === 'run.completed') ? true : undefined), 'the first run to complete', {
      timeoutMs: 15_000,
    });

    expect(await control('pause', { actor: 'olga', reason: 'incident 7: a bad model release', idempotency_key: 'pause-1' })).toMatchObject({
      ok: true,
      project: { status: 'paused' },
    });
    const runs = ['wr-ks-1', 'wr-ks-2', 'wr-ks-3'];
    for (const run of runs) await agents[0]!.startRun({ workflow_run_id: run, workflow: 'feature', started_by: 'sam', input: 'x' });

    // Each run is started and routed, and the ledger holds its handoff as pending.
    const held = await waitFor(
      async () => {
        const ids: string[] = [];
        for (const run of runs) {
          const routed = (await runEvents(run)).find((e) => e.type === 'run.routed');
          if (!routed) return undefined;
          const id = (routed.payload as { handoff_id: string }).handoff_id;
          const events = await handoffEvents(id);
          if (!events.some((e) => e.type === 'handoff.created')) return undefined;
          ids.push(id);
        }
        return ids;
      },
      'the paused runs to be routed and their handoffs created',
      { timeoutMs: 15_000 },
    );
    await sleep(1_000); // time for an offer that should not come
    expect(offered.filter((o) => held.some((id) => o.endsWith(`:${id}`)))).toEqual([]);
    const ledger = new LedgerClient(nats, prefix, { as: Principals.agent(PROJECT, 'issue') });
    const refused = await ledger.claim(PROJECT, { handoff_id: held[0]!, idempotency_key: 'claim-while-paused' });
    expect(refused).toMatchObject({ ok: false, error: { code: 'project_paused' } });
    for (const run of runs) expect((await runEvents(run)).map((e) => e.type)).not.toContain('run.result_recorded');

    expect(await control('resume', { actor: 'olga', reason: 'fixed', idempotency_key: 'resume-1' })).toMatchObject({
      ok: true,
      project: { status: 'active' },
    });
    for (const run of runs) {
      await waitFor(async () => ((await runEvents(run)).some((e) => e.type === 'run.completed') ? true : undefined), `${run} to complete after the resume`, {
        timeoutMs: 30_000,
      });
    }

    // Folded from the streams: each run advanced once per step and completed once; every held
    // handoff was claimed by its agent exactly once.
    for (const run of runs) {
      const types = (await runEvents(run)).map((e) => e.type);
      expect(types.filter((t) => t === 'run.result_recorded')).toHaveLength(2);
      expect(types.filter((t) => t === 'run.completed')).toHaveLength(1);
    }
    for (const id of held) {
      const types = (await handoffEvents(id)).map((e) => e.type);
      expect(types.filter((t) => t === 'handoff.claimed')).toHaveLength(1);
      expect(claimed.filter((c) => c === `issue:${id}`)).toHaveLength(1);
    }
  }, 90_000);

  it('an offer queued before the pause: its claim is refused project_paused and the SDK lets it go (acknowledged, not redelivered through the pause); the resume offers it again and it is claimed once', async () => {
    // The issue agent stops taking offers, so the next run's offer waits in its durable.
    await subscriptions[0]!.stop();
    const run = 'wr-ks-queued';
    await agents[0]!.startRun({ workflow_run_id: run, workflow: 'feature', started_by: 'sam', input: 'x' });
    const names = batonStreamNames(prefix);
    const durable = offerDurableName(PROJECT, 'issue');
    const queued = await waitFor(
      async () => {
        const routed = (await runEvents(run)).find((e) => e.type === 'run.routed');
        const info = await nats.jsm.consumers.info(names.inbox, durable);
        return routed && info.num_pending === 1 ? (routed.payload as { handoff_id: string }).handoff_id : undefined;
      },
      'the run offer to wait in the issue agent`s durable',
      { timeoutMs: 15_000 },
    );
    expect(await control('pause', { actor: 'olga', reason: 'incident 8', idempotency_key: 'pause-2' })).toMatchObject({
      ok: true,
      project: { status: 'paused' },
    });

    const refusals: string[] = [];
    const seen: string[] = [];
    subscriptions[0] = await agents[0]!.handoffs({
      concurrency: 4,
      backoffMs: [200, 500],
      onOffer: async (offer) => {
        seen.push(offer.handoffId);
        const handoff = await offer.tryClaim().catch((error: { code?: string }) => {
          refusals.push(String(error.code));
          throw error;
        });
        if (!handoff) return;
        claimed.push(`issue:${handoff.id}`);
        await offer.finish({ body: 'issue did it', decision: decisions.advance() });
      },
      onError: () => undefined,
    });
    // The queued offer is delivered and refused; the SDK acknowledges it instead of asking the ledger again every few seconds.
    await waitFor(
      async () => {
        const info = await nats.jsm.consumers.info(names.inbox, durable);
        return refusals.length > 0 && info.num_pending === 0 && info.num_ack_pending === 0 ? true : undefined;
      },
      'the refused offer to be acknowledged',
      { timeoutMs: 15_000 },
    );
    expect(refusals).toEqual(['project_paused']);
    expect(seen).toEqual([queued]);

    expect(await control('resume', { actor: 'olga', idempotency_key: 'resume-2' })).toMatchObject({ ok: true, project: { status: 'active' } });
    await waitFor(
      async () => ((await runEvents(run)).some((e) => e.type === 'run.completed') ? true : undefined),
      'the queued run to complete after the resume',
      {
        timeoutMs: 30_000,
      },
    );
    expect(seen).toEqual([queued, queued]); // refused once while paused, offered again by the resume
    expect((await handoffEvents(queued)).filter((e) => e.type === 'handoff.claimed')).toHaveLength(1);
    expect(claimed.filter((c) => c === `issue:${queued}`)).toHaveLength(1);
  }, 90_000);

  it('baton pause refuses a project with no published definition (project_unknown) unless --force; baton project shows what a project holds: its definition and kill switch', async () => {
    const baton = async (...argv: string[]) => {
      const io = bufferedIo();
      const code = await main(argv, { io, env: { NATS_URL, BATON_PREFIX: prefix, BATON_OPERATOR: 'olga' } });
      return { code, out: io.out(), err: io.err() };
    };
    const typo = await baton('pause', 'opz', '--reason', 'incident 9', '--json');
    expect(typo.code).toBe(1);
    expect(JSON.parse(typo.out)).toMatchObject({ ok: false, error: { code: 'project_unknown', details: { project: 'opz' } } });
    expect((await baton('pause', 'opz', '--reason', 'incident 9')).err).toMatch(/project_unknown: project opz has no published definition.*--force/);
    // Never paused, no definition: unknown to Baton.
    const unknown = await baton('project', 'opz', '--json');
    expect(unknown.code).toBe(1);
    expect(JSON.parse(unknown.err)).toMatchObject({ error: { code: 'not_found', details: { project: 'opz' } } });

    const forced = await baton('pause', 'opz', '--reason', 'before it is set up', '--force');
    expect(forced).toMatchObject({ code: 0 });
    expect(forced.out).toMatch(/status: +paused/);
    const shown = await baton('project', 'opz');
    expect(shown.code).toBe(0);
    expect(shown.out).toMatch(/definition: +none published/);
    expect(shown.out).toMatch(/status: +paused/);
    // The admin connection paused it; the person BATON_OPERATOR names is its claim, shown as one.
    expect(shown.out).toMatch(/paused_by: +admin\n/);
    expect(shown.out).toMatch(/on_behalf_of: +olga \(claimed by the admin connection\)/);
    expect(shown.out).toMatch(/reason: +before it is set up/);
    expect((await baton('resume', 'opz')).code).toBe(0);

    const ops = await baton('project', PROJECT, '--json');
    expect(ops.code).toBe(0);
    expect(JSON.parse(ops.out)).toMatchObject({
      project: PROJECT,
      definition: { publishes: 1, agents: ['issue', 'architect'], workflows: ['feature'] },
      control: { status: 'active', version: 4 }, // the two pauses and resumes of the tests above
    });
    expect((await baton('project', PROJECT)).out).toMatch(/agents: +issue, architect/);
  });
});
