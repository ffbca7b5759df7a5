import { randomBytes } from 'node:crypto';
import { headers as natsHeaders } from 'nats';
import { batonStreamNames, connectNats, headersToRecord, newTraceparent, parseTraceparent, traceIdFromHeaders, type NatsHandle } from '@baton/eventstore';
import { createProjectionStore, createRedis, type RedisHandle } from '@baton/projections';
import type { RunningService } from '@baton/platform';
import { MsgIds } from '@baton/contracts';
import { handoffIdFor } from '@baton/domain';
import { AgentClaims } from '@baton/testing';
import { createBatonClient, decisions } from '@baton/sdk';
import { waitFor } from '@baton/wait';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the three services run in this process (no build needed)
import { startRouter } from '../../apps/router/src/router.app';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the three services run in this process (no build needed)
import { startLedger } from '../../apps/ledger/src/ledger';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the three services run in this process (no build needed)
import { startNotifier } from '../../apps/notifier/src/main';
import { stopInProcess, twoStepDefinition } from './support';

/*
 * One run followed across the services by its trace (router, ledger and notifier in this
 * process, real NATS and Redis): the `traceparent` an agent result is published with is on the
 * run's events' headers, on the ledger's handoff events and on the inbox item (`trace_id`).
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const encoder = new TextEncoder();
const decoder = new TextDecoder();

describe('trace context from agent result to inbox item (router + ledger + notifier, real NATS and Redis)', () => {
  const prefix = `tr${randomBytes(5).toString('hex')}`;
  const services: RunningService[] = [];
  let nats: NatsHandle;
  let redis: RedisHandle;
  const env = { ...process.env, NATS_URL, REDIS_URL, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: 'error' };

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    redis = createRedis(REDIS_URL);
    services.push(await startRouter(env), await startLedger(env), await startNotifier(env));
  }, 60_000);

  afterAll(() => stopInProcess(services, nats, redis, prefix), 30_000);

  /** Every stored event of one aggregate, with the trace id of its headers. */
  async function storedEvents(kind: string, id: string) {
    const stream = batonStreamNames(prefix).events;
    const consumer = await nats.js.consumers.get(stream, { filterSubjects: `${prefix}.ev.demo.${kind}.${id}` });
    const info = await consumer.info(true);
    const out: Array<{ type: string; traceId: string | null }> = [];
    let left = info.num_pending;
    while (left > 0) {
      const msg = await consumer.next({ expires: 2000 });
      if (!msg) break;
      left--;
      const envelope = JSON.parse(decoder.decode(msg.data)) as { type: string };
      out.push({ type: envelope.type, traceId: traceIdFromHeaders(headersToRecord(msg.headers)) });
    }
    return out;
  }

  it('one trace id links the agent result, the run events, the handoff events and the inbox item', async () => {
    const reply = await nats.connection.request(`${prefix}.cmd.router.demo.publish_definition`, encoder.encode(JSON.stringify(twoStepDefinition('demo'))), {
      timeout: 10_000,
    });
    expect(JSON.parse(decoder.decode(reply.data))).toMatchObject({ ok: true });
    const run = 'wr-trace-1';
    await nats.js.publish(
      `${prefix}.in.demo.start`,
      encoder.encode(JSON.stringify({ workflow_run_id: run, project: 'demo', workflow: 'feature', started_by: 'sam', input: 'x' })),
      { msgID: MsgIds.start('demo', run) },
    );
    const routed = await waitFor(async () => (await storedEvents('run', run)).find((e) => e.type === 'run.routed'), 'the run to be routed', {
      timeoutMs: 15_000,
    });
    const startTrace = routed.traceId;
    expect(startTrace).toMatch(/^[0-9a-f]{32}$/); // a start without a traceparent starts a trace of its own

    // The agent's result, published with a traceparent (what the SDK's publishResult adds).
    const traceparent = newTraceparent();
    const traceId = parseTraceparent(traceparent)!.traceId;
    const hdrs = natsHeaders();
    hdrs.set('traceparent', traceparent);
    // The agent claimed the entry handoff first: a result is accepted only under its claim (docs/runs.md).
    const entry = handoffIdFor(run, { kind: 'start', id: run });
    const agents = new AgentClaims(nats, prefix, 'demo');
    const claimId = await agents.claim('issue', entry);
    await agents.close();
    const result = {
      result_id: 'res-trace-1',
      run_id: 'ar-1',
      project: 'demo',
      workflow_run_id: run,
      agent: 'issue',
      produced_at: new Date().toISOString(),
      body: 'no sentinel: the run holds',
      handoff_id: entry,
      claim_id: claimId,
    };
    await nats.js.publish(`${prefix}.in.demo.result.issue`, encoder.encode(JSON.stringify(result)), {
      msgID: MsgIds.result('demo', result.workflow_run_id, result.result_id),
      headers: hdrs,
    });

    const runEvents = await waitFor(
      async () => {
        const events = await storedEvents('run', run);
        return events.some((e) => e.type === 'run.held') ? events : undefined;
      },
      'the run to hold',
      { timeoutMs: 15_000 },
    );
    const fromResult = runEvents.filter((e) => e.traceId === traceId).map((e) => e.type);
    expect(fromResult).toEqual(expect.arrayContaining(['run.result_recorded', 'run.held']));
    expect(runEvents.find((e) => e.type === 'run.started')?.traceId).toBe(startTrace);

    // The dispatch reactor's ledger call carried the trace: the handoff's completion is in it.
    const handoffId = await waitFor(
      async () => {
        const stream = batonStreamNames(prefix).events;
        const info = await nats.jsm.streams.info(stream, { subjects_filter: `${prefix}.ev.demo.handoff.*` });
        for (const subject of Object.keys(info.state.subjects ?? {})) {
          const id = subject.split('.').pop()!;
          if ((await storedEvents('handoff', id)).some((e) => e.traceId === traceId)) return id;
        }
        return undefined;
      },
      'a handoff event in the trace',
      { timeoutMs: 15_000 },
    );
    const handoffEvents = await storedEvents('handoff', handoffId);
    expect(handoffEvents.find((e) => e.type === 'handoff.created')?.traceId).toBe(startTrace);
    expect(handoffEvents.filter((e) => e.traceId === traceId).map((e) => e.type)).toContain('handoff.completed_by_result');

    // The notifier recorded it on the inbox item the hold opened.
    const store = createProjectionStore({ redis: redis.client, prefix: `${prefix}:proj` });
    const item = await waitFor(
      async () => {
        const page = await store.items('inbox', 'inbox').query({ filters: { kind: 'hold' } });
        return page.items.find((i) => i['workflow_run_id'] === run);
      },
      'the hold item',
      { timeoutMs: 15_000 },
    );
    expect(item['trace_id']).toBe(traceId);

    // The notifier's metrics: inbox size and open handoffs from its projections.
    const notifier = services.find((s) => s.runtime.service === 'notifier')!;
    const text = await (await fetch(`${await notifier.app.getUrl()}/metrics`)).text();
    expect(text).toMatch(/baton_inbox_open_items\{[^}]*kind="hold"[^}]*\} [1-9]/);
    expect(text).toMatch(/baton_open_handoffs\{[^}]*status="pending"[^}]*\} \d+/);
    expect(text).toMatch(/baton_events_handled_total\{[^}]*consumer="notifier_projections"[^}]*outcome="acked"[^}]*\} [1-9]/);
    // Its batch applier is timed too: each message with its share of its batch's time.
    expect(text).toMatch(/baton_handler_duration_seconds_count\{[^}]*consumer="notifier_projections"[^}]*\} [1-9]/);
  });

  it('an SDK agent with no tracing of its own keeps the run one trace: its claim and its result continue the trace its offer carried', async () => {
    const run = 'wr-trace-sdk';
    await nats.js.publish(
      `${prefix}.in.demo.start`,
      encoder.encode(JSON.stringify({ workflow_run_id: run, project: 'demo', workflow: 'feature', started_by: 'sam', input: 'x' })),
      { msgID: MsgIds.start('demo', run) },
    );
    const agent = await createBatonClient({ nats, prefix, project: 'demo', agent: 'issue' });
    try {
      const subscription = await agent.handoffs({
        onOffer: async (offer) => {
          if (offer.handoff?.workflow_run_id !== run || (await offer.tryClaim({ autoHeartbeat: false })) === null) return;
          await offer.finish({ body: 'triaged', decision: decisions.advance('triaged') });
        },
      });
      const runEvents = await waitFor(
        async () => {
          const events = await storedEvents('run', run);
          return events.filter((e) => e.type === 'run.routed').length >= 2 ? events : undefined;
        },
        'the run routed past the SDK agent',
        { timeoutMs: 15_000 },
      );
      await subscription.stop();
      const startTrace = runEvents.find((e) => e.type === 'run.started')!.traceId;
      expect(startTrace).toMatch(/^[0-9a-f]{32}$/);
      // The result the agent published, and the route it caused, are in the start's trace.
      expect(runEvents.map((e) => [e.type, e.traceId === startTrace])).toEqual([
        ['run.started', true],
        ['run.routed', true],
        ['run.result_recorded', true],
        ['run.routed', true],
      ]);
      // So is the claim it sent the ledger (and the completion by its result).
      const entry = handoffIdFor(run, { kind: 'start', id: run });
      const handoff = await waitFor(
        async () => {
          const events = await storedEvents('handoff', entry);
          return events.some((e) => e.type === 'handoff.completed_by_result') ? events : undefined;
        },
        'the entry handoff completed',
        { timeoutMs: 15_000 },
      );
      expect(handoff.map((e) => [e.type, e.traceId === startTrace])).toEqual([
        ['handoff.created', true],
        ['handoff.claimed', true],
        ['handoff.completed_by_result', true],
      ]);
    } finally {
      await agent.close();
    }
  });
});
