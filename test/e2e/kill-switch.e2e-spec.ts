import { randomBytes } from 'node:crypto';
import { createEventRegistry, ledgerCommandSubject, Principals, ProjectControlReplySchema } from '@baton/contracts';
import { batonStreamNames, connectNats, JetStreamEventStore, LedgerClient, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { createBatonClient, decisions, type BatonAgent, type OfferSubscription } from '@baton/sdk';
import { waitFor } from '@baton/wait';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the two services run in this process (no build needed)
import { startRouter } from '../../apps/router/src/router.app';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the two services run in this process (no build needed)
import { startLedger } from '../../apps/ledger/src/ledger';
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
});
