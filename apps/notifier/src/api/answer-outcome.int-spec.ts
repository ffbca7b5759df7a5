import { randomBytes } from 'node:crypto';
import { createEventRegistry, Subjects } from '@baton/contracts';
import { runDecider } from '@baton/domain';
import { batonStreamNames, batonTopology, connectNats, JetStreamEventStore, provision, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { createRedis, scenarioSteps, type RedisHandle } from '@baton/projections';
import { TokenStore } from '../auth/token-store';
import { startNotifier } from '../main';
import { startPrivateServer, type PrivateServer } from './private-server.int-support';

/*
 * An operator's answer whose publish the stream never confirms: the API must not answer 500 and
 * lose the id it generated (a retry with a new id would be a second answer). It answers 503
 * `answer_outcome_unknown` with the `answer_id` and the `status_url`, and sending that same
 * `answer_id` again once NATS answers stores the answer once. The notifier runs in process against
 * a private nats-server on a free loopback port, which the test pauses (SIGSTOP); the shared NATS
 * is never touched. Redis is the shared one, under this test's own key prefix.
 */

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const decoder = new TextDecoder();

describe('an answer the stream did not confirm: 503 answer_outcome_unknown with its answer_id, and a retry of that id stores it once (private nats-server)', () => {
  const prefix = `ao${randomBytes(5).toString('hex')}`;
  let server: PrivateServer;
  let nats: NatsHandle;
  let redis: RedisHandle;
  let service: RunningService;
  let base: string;
  let token: string;
  let paused = false;

  beforeAll(async () => {
    server = await startPrivateServer('nats-server');
    const natsUrl = server.url;
    nats = await connectNats({ servers: natsUrl, reconnect: false });
    redis = createRedis();
    await provision(nats.jsm, { streams: batonTopology(prefix).streams });
    // Run wr-a of the projections' scenario: started, then stopped on policy with a frozen refund.
    const events = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    let n = 0;
    for (const step of scenarioSteps().filter((s) => s.aggregate === 'run' && s.id === 'wr-a')) {
      const ref = { project: 'demo', kind: 'run', id: step.id } as const;
      const meta = {
        commandId: `cmd-${++n}`,
        occurredAt: step.command.metadata.now,
        actor: step.actor,
        origin: step.origin,
        causationId: null,
        correlationId: step.id,
      };
      const result = await events.handleCommand(ref, runDecider, step.command, meta);
      if (!result.ok) throw new Error(`${step.command.type} refused: ${result.error.code}`);
    }
    service = await startNotifier({
      ...process.env,
      NATS_URL: natsUrl,
      BATON_PREFIX: prefix,
      HTTP_PORT: '0',
      LOG_LEVEL: 'error',
      NOTIFIER_ANSWER_WAIT_MS: '200',
    });
    base = (await service.app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
    token = (await new TokenStore(redis.client, prefix).create({ name: 'olga', role: 'operator', projects: ['demo'], now: new Date().toISOString() })).token;
    const deadline = Date.now() + 15_000;
    while ((await fetch(`${base}/v1/projects/demo/stops/stop-r-wr-a:res-a1`, { headers: { authorization: `Bearer ${token}` } })).status !== 200) {
      if (Date.now() > deadline) throw new Error('the stop packet never reached the projections');
      await sleep(100);
    }
  }, 60_000);

  afterAll(async () => {
    if (paused) server.resume();
    await service?.stop().catch(() => undefined);
    await nats?.drain().catch(() => undefined);
    await server?.remove();
    for await (const batch of redis.client.scanStream({ match: `${prefix}:*`, count: 500 })) {
      const keys = batch as string[];
      if (keys.length > 0) await redis.client.unlink(...keys);
    }
    await redis?.close().catch(() => undefined);
  }, 30_000);

  const answer = async (body: Record<string, unknown>) => {
    const response = await fetch(`${base}/v1/projects/demo/stops/stop-r-wr-a:res-a1/answer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(20_000),
    });
    return {
      status: response.status,
      retryAfter: response.headers.get('retry-after'),
      body: (await response.json()) as {
        answer_id?: string;
        duplicate?: boolean;
        error?: { code: string; details?: { answer_id?: string; status_url?: string } };
      },
    };
  };

  it('SIGSTOP: an answer without an answer_id is refused 503 answer_outcome_unknown naming the id it was sent under; SIGCONT: that id sent again is stored once', async () => {
    await server.pause();
    paused = true;
    const unknown = await answer({ action: 'deny', note: 'not without a receipt' });
    server.resume();
    paused = false;

    expect(unknown).toMatchObject({ status: 503, retryAfter: '1', body: { error: { code: 'answer_outcome_unknown' } } });
    const answerId = unknown.body.error?.details?.answer_id;
    expect(answerId).toEqual(expect.any(String));
    expect(unknown.body.error?.details?.status_url).toBe(`/v1/projects/demo/runs/wr-a/answers/${answerId}`);

    // The client does what the error says: the same answer, the same answer_id. No router runs
    // here, so the answer is not decided: 202 pending.
    const retried = await answer({ answer_id: answerId, action: 'deny', note: 'not without a receipt' });
    expect(retried).toMatchObject({ status: 202, body: { answer_id: answerId } });

    // One answer stored, whether the paused publish reached the stream or the retry stored it.
    const subject = Subjects.operatorAnswer(prefix, 'demo');
    const info = await nats.jsm.streams.info(batonStreamNames(prefix).inbox, { subjects_filter: subject });
    expect(info.state.subjects?.[subject]).toBe(1);
    const stored = await nats.jsm.streams.getMessage(batonStreamNames(prefix).inbox, { last_by_subj: subject });
    expect(JSON.parse(decoder.decode(stored.data))).toMatchObject({
      workflow_run_id: 'wr-a',
      answer: { kind: 'stop_answer', answer: { packet_id: 'stop-r-wr-a:res-a1', answer_id: answerId, action: 'deny', answered_by: 'olga' } },
    });
  }, 40_000);
});
