import { randomBytes } from 'node:crypto';
import { createEventRegistry } from '@baton/contracts';
import { connectNats, headersFrom, JetStreamEventStore, newTraceparent, parseTraceparent, type NatsHandle } from '@baton/eventstore';
import { createRedis, type RedisHandle } from '@baton/projections';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the services run in this process (no build needed)
import { startRouter } from '../../apps/router/src/router.app';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the services run in this process (no build needed)
import { startNotifier } from '../../apps/notifier/src/main';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the router tests' stand-in for the ledger and an agent's claim
import { claimHandoff, currentHandoff } from '../../apps/router/src/int/support';
import { sleep, stopInProcess, twoStepDefinition } from './support';

/*
 * Human action notices have one publisher, the notifier (it owns what a person sees): a hold
 * decided by the router is one message on `<prefix>.notice.<project>`, not one from the router's
 * dispatch reactor and another from the notifier. Router and notifier run in this process against
 * real NATS and Redis; the test stands in for the ledger and the agent's claim (the claim rule).
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const encoder = new TextEncoder();
const decoder = new TextDecoder();

describe('human action notices: exactly one publisher (router + notifier in process, real NATS and Redis)', () => {
  const prefix = `nt${randomBytes(5).toString('hex')}`;
  const services: RunningService[] = [];
  let nats: NatsHandle;
  let redis: RedisHandle;
  const env = { ...process.env, NATS_URL, REDIS_URL, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: 'error' };

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    redis = createRedis(REDIS_URL);
    services.push(await startRouter(env), await startNotifier(env));
  }, 60_000);

  afterAll(() => stopInProcess(services, nats, redis, prefix), 30_000);

  it('one hold is one message on <prefix>.notice.<project>, in the trace of the result that caused it', async () => {
    const seen: Array<{ notice_id: string; workflow_run_id: string }> = [];
    const traceparents: Array<string | undefined> = [];
    nats.connection.subscribe(`${prefix}.notice.>`, {
      callback: (_err, msg) => {
        seen.push(JSON.parse(decoder.decode(msg.data)) as { notice_id: string; workflow_run_id: string });
        traceparents.push(msg.headers?.get('traceparent') || undefined);
      },
    });
    await nats.connection.flush();
    const store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });

    const reply = await nats.connection.request(`${prefix}.cmd.router.demo.publish_definition`, encoder.encode(JSON.stringify(twoStepDefinition('demo'))), {
      timeout: 10_000,
    });
    expect(JSON.parse(decoder.decode(reply.data))).toMatchObject({ ok: true });
    const run = 'wr-notice-1';
    await nats.js.publish(
      `${prefix}.in.demo.start`,
      encoder.encode(JSON.stringify({ workflow_run_id: run, project: 'demo', workflow: 'feature', started_by: 'sam', input: 'x' })),
      { msgID: run },
    );
    const handoff = await waitFor(async () => (await currentHandoff(store, 'demo', run)) ?? undefined, 'the run to be routed', { timeoutMs: 15_000 });
    const claimId = await claimHandoff(store, 'demo', handoff.handoffId, 'issue');
    expect(claimId).not.toBeNull();

    // A result with no decision: the run holds for a person.
    const result = {
      result_id: 'res-notice-1',
      run_id: 'ar-1',
      project: 'demo',
      workflow_run_id: run,
      agent: 'issue',
      produced_at: new Date().toISOString(),
      body: 'no sentinel: the run holds',
      handoff_id: handoff.handoffId,
      claim_id: claimId,
    };
    const traceparent = newTraceparent();
    await nats.js.publish(`${prefix}.in.demo.result.issue`, encoder.encode(JSON.stringify(result)), {
      msgID: result.result_id,
      headers: headersFrom({ traceparent }),
    });
    await waitFor(
      async () => ((await store.read({ project: 'demo', kind: 'run', id: run })).events.some((e) => e.type === 'run.held') ? true : undefined),
      'the hold',
      { timeoutMs: 15_000 },
    );

    await waitFor(async () => (seen.length > 0 ? true : undefined), 'the notice', { timeoutMs: 15_000 });
    await sleep(3000); // a second publisher would have published by now
    const held = (await store.read({ project: 'demo', kind: 'run', id: run })).events.filter((e) => e.type === 'run.notice_emitted');
    expect(held).toHaveLength(1);
    expect(seen).toEqual([
      expect.objectContaining({ workflow_run_id: run, notice_id: (held[0]!.payload as { notice: { notice_id: string } }).notice.notice_id }),
    ]);
    // The notice continues the result's trace (the router's events carry it; the notifier carries it on).
    expect(parseTraceparent(traceparents[0])?.traceId).toBe(parseTraceparent(traceparent)?.traceId);
  });
});
