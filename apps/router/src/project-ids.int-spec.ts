import { randomBytes } from 'node:crypto';
import { createEventRegistry, type AgentResult } from '@baton/contracts';
import { connectNats, JetStreamEventStore, type NatsHandle, type StoredEvent } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { createBatonClient, type BatonAgent } from '@baton/sdk';
import { waitFor } from '@baton/wait';
import type { Msg, Subscription } from 'nats';
import { startRouter } from './router.app';
import { claimHandoff, currentHandoff, deleteStreams, publishDefinition } from './int/support';

/*
 * Issue 11 part 3 through the running router over the real NATS: every id that meets a shared
 * stream is scoped by project. Two projects start the same workflow_run_id and publish results with
 * the same result_id within one second (through the SDK, so with the SDK's message ids); both runs
 * exist with their own outcomes, and neither project's events were taken for the other's
 * duplicates. A tiny ledger responder answers the router's handoff requests.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const encoder = new TextEncoder();
const decoder = new TextDecoder();

const definition = (project: string) => ({
  project,
  agents: [{ name: 'issue' }, { name: 'architect' }],
  workflows: [
    {
      name: 'feature',
      version: 1,
      entry: 'triage',
      steps: [
        { id: 'triage', agent: 'issue', next: 'analyze' },
        { id: 'analyze', agent: 'architect', terminal: true },
      ],
    },
  ],
});

describe('ids are scoped by project: two projects, the same run id and result id (real NATS)', () => {
  const prefix = `pi${randomBytes(5).toString('hex')}`;
  const projects = ['alpha', 'beta'] as const;
  let router: RunningService;
  let nats: NatsHandle;
  let store: JetStreamEventStore;
  const subs: Subscription[] = [];
  const agents: BatonAgent[] = [];

  const events = async (project: string, runId: string): Promise<StoredEvent[]> => (await store.read({ project, kind: 'run', id: runId })).events;
  const waitTypes = (project: string, runId: string, last: string) =>
    waitFor(async () => {
      const all = await events(project, runId);
      return all.some((e) => e.type === last) ? all : undefined;
    }, `${last} on ${project}/${runId}`);

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    router = await startRouter({ ...process.env, NATS_URL, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: 'error' });
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    for (const project of projects) {
      // Answer like the ledger: creates and completions succeed (the handoff itself is written by claimHandoff).
      subs.push(
        nats.connection.subscribe(`${prefix}.cmd.ledger.${project}.>`, {
          callback: (_err, msg: Msg) => {
            const body = JSON.parse(decoder.decode(msg.data)) as Record<string, unknown>;
            const now = new Date().toISOString();
            const handoff = {
              id: String(body['handoff_id']),
              project,
              kind: 'task',
              priority: 'medium',
              status: 'pending',
              from_agent: 'baton-router',
              summary: 'test',
              context: {},
              acceptance: {},
              retry: { max_retries: 3, retry_count: 0 },
              escalation: {},
              created_at: now,
              updated_at: now,
              version: 1,
            };
            msg.respond(encoder.encode(JSON.stringify({ ok: true, handoff, events: 1 })));
          },
        }),
      );
      expect(await publishDefinition(nats, prefix, project, definition(project))).toMatchObject({ ok: true });
      agents.push(await createBatonClient({ nats, prefix, project, agent: 'issue' }));
    }
  }, 30_000);

  afterAll(async () => {
    for (const sub of subs) sub.unsubscribe();
    for (const agent of agents) await agent.close();
    await router?.stop();
    await deleteStreams(nats, prefix);
    await nats.close();
  }, 30_000);

  it('both runs start, and results with the same result_id, published within a second, each get their own outcome', async () => {
    const runId = `wr-${randomBytes(3).toString('hex')}`;
    const resultId = `res-${runId}`;
    const within = async <T>(work: () => Promise<T>): Promise<T> => {
      const t0 = Date.now();
      const out = await work();
      expect(Date.now() - t0).toBeLessThan(1_000); // one second apart at most: well inside the 2-minute duplicate window
      return out;
    };
    const starts = await within(() => Promise.all(agents.map((agent) => agent.startRun({ workflow_run_id: runId, workflow: 'feature', started_by: 'sam' }))));
    expect(starts.map((s) => s.duplicate)).toEqual([false, false]);

    // Each project's agent claims its run's entry handoff, then both publish the same result id.
    const claims = await Promise.all(
      projects.map(async (project) => {
        const current = await waitFor(async () => (await currentHandoff(store, project, runId)) ?? undefined, `${project}'s run to be routed`);
        return { handoff_id: current.handoffId, claim_id: (await claimHandoff(store, project, current.handoffId, 'issue')) as string };
      }),
    );
    const decisions: Array<AgentResult['decision']> = [
      { dispatch: { status: 'hold', reason: 'alpha needs a person' } },
      { dispatch: { status: 'terminate', reason: 'beta is done' } },
    ];
    const receipts = await within(() =>
      Promise.all(
        agents.map((agent, i) =>
          agent.publishResult({ result_id: resultId, run_id: `ar-${runId}`, workflow_run_id: runId, decision: decisions[i], ...claims[i] }),
        ),
      ),
    );
    expect(receipts.map((r) => r.duplicate)).toEqual([false, false]);

    // The hold and its notice are one decision, stored one publish per event: wait for the last, not the hold.
    const alpha = await waitTypes('alpha', runId, 'run.notice_emitted');
    const beta = await waitTypes('beta', runId, 'run.terminated');
    expect(alpha.map((e) => e.type)).toEqual(['run.started', 'run.routed', 'run.result_recorded', 'run.held', 'run.notice_emitted']);
    expect(beta.map((e) => e.type)).toEqual(['run.started', 'run.routed', 'run.result_recorded', 'run.terminated']);
    expect(alpha.find((e) => e.type === 'run.held')?.payload).toMatchObject({ reason: 'alpha needs a person' });
    expect(beta.find((e) => e.type === 'run.terminated')?.payload).toMatchObject({ reason: 'beta is done' });
    // The event ids name their project and run, so neither was taken for the other's duplicate.
    // (A start's ids also carry a digest of what makes it that start: another start under the id gets other ids.)
    expect(alpha[0]!.id).toMatch(new RegExp(`^ev0-s-alpha:run:${runId}:${runId}@[0-9a-f]{16}$`));
    expect(beta[0]!.id).toMatch(new RegExp(`^ev0-s-beta:run:${runId}:${runId}@[0-9a-f]{16}$`));
    expect(new Set([...alpha, ...beta].map((e) => e.id)).size).toBe(alpha.length + beta.length);
    // Identity from the subject, never the body: the SDK starts on `…start.<agent>`, so the start
    // names that agent, not the body's started_by ('sam'); the entry route is the engine's (seed 000 §5).
    expect(alpha.slice(0, 2).map((e) => [e.actor, e.origin])).toEqual([
      ['issue', 'agent'],
      ['baton-router', 'engine_fallback'],
    ]);
    expect(alpha[0]!.payload).toMatchObject({ people: { started_by: 'sam' } });
  });

  it("a start on the project's shared subject records `project-client`, one on `…start.<agent>` that agent; a body naming another project is refused on either", async () => {
    const [shared, named, foreign] = ['sh', 'nm', 'fx'].map((tag) => `wr-${tag}-${randomBytes(3).toString('hex')}`) as [string, string, string];
    const body = (runId: string, project = 'alpha') =>
      encoder.encode(JSON.stringify({ workflow_run_id: runId, project, workflow: 'feature', started_by: 'sam' }));
    await nats.js.publish(`${prefix}.in.alpha.start`, body(shared), { msgID: `start:alpha:${shared}` });
    await nats.js.publish(`${prefix}.in.alpha.start.architect`, body(named), { msgID: `start:alpha:${named}` });
    await nats.js.publish(`${prefix}.in.alpha.start.architect`, body(foreign, 'beta'), { msgID: `start:alpha:${foreign}` });
    const [a, b] = await Promise.all([waitTypes('alpha', shared, 'run.routed'), waitTypes('alpha', named, 'run.routed')]);
    expect([a[0]!.actor, b[0]!.actor]).toEqual(['project-client', 'architect']);
    expect(b.map((e) => e.origin)).toEqual(['agent', 'engine_fallback']);
    const letter = await waitFor(async () => {
      const dlq = `${prefix.toUpperCase()}_DLQ`;
      const msg = await nats.jsm.streams.getMessage(dlq, { last_by_subj: `${prefix}.dlq.router-agent-starts` }).catch(() => null);
      return msg ?? undefined;
    }, 'the foreign-project start dead-lettered by the agent-named starts consumer');
    expect(letter.header.get('Baton-Dlq-Reason')).toMatch(/project_mismatch/);
    expect((await events('beta', foreign)).length).toBe(0);
  });
});
