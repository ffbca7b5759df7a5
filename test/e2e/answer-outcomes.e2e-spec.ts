import { randomBytes } from 'node:crypto';
import { createEventRegistry } from '@baton/contracts';
import { connectNats, JetStreamEventStore, type NatsHandle, type StoredEvent } from '@baton/eventstore';
import { createRedis, type RedisHandle } from '@baton/projections';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the services run in this process (no build needed)
import { startRouter } from '../../apps/router/src/router.app';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the services run in this process (no build needed)
import { startNotifier } from '../../apps/notifier/src/main';
// eslint-disable-next-line @nx/enforce-module-boundaries -- tokens are made as `baton token create` would
import { TokenStore } from '../../apps/notifier/src/auth/token-store';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the `baton` command, in process
import { main as baton } from '../../apps/cli/src/main';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the `baton` command, in process
import { bufferedIo } from '../../apps/cli/src/output';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the router tests' stand-in for the ledger and an agent's claim
import { claimHandoff, currentHandoff } from '../../apps/router/src/int/support';
import { stopInProcess, twoStepDefinition } from './support';

/*
 * Issue 14, "Answers and decisions say what happened": an operator's answer waits (bounded) for
 * the router's decision in the run's event stream and answers with the outcome — 200 applied with
 * the run's new state, 409 with the router's refusal code, 202 with a status link only when it is
 * not decided in time. Two operators answering one stop at once: exactly one is applied, and the
 * other is told it was refused. Router and notifier run in this process against real NATS and
 * Redis; the test stands in for the ledger and the agent's claim (the claim rule).
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const PROJECT = 'demo';
const encoder = new TextEncoder();

interface Reply {
  status: number;
  body: Record<string, unknown> & { error?: { code: string; details?: Record<string, unknown> } };
}

describe('operator answers say what happened (router + notifier in process, real NATS and Redis)', () => {
  const prefix = `ao${randomBytes(5).toString('hex')}`;
  const services: RunningService[] = [];
  let nats: NatsHandle;
  let redis: RedisHandle;
  let store: JetStreamEventStore;
  let base: string;
  let olga: string;
  let omar: string;
  const env = {
    ...process.env,
    NATS_URL,
    REDIS_URL,
    BATON_PREFIX: prefix,
    HTTP_PORT: '0',
    LOG_LEVEL: 'error',
    BATON_NATS_AUTH: 'none',
    NOTIFIER_ANSWER_WAIT_MS: '8000',
  };

  const post = async (path: string, token: string, body: unknown): Promise<Reply> => {
    const response = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Reply['body'] };
  };
  const get = async (path: string, token: string): Promise<Reply> => {
    const response = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } });
    return { status: response.status, body: (await response.json()) as Reply['body'] };
  };
  const runEvents = async (run: string): Promise<StoredEvent[]> => (await store.read({ project: PROJECT, kind: 'run', id: run })).events;

  /** Start a run of `feature`, claim its first handoff as the issue agent and publish `result` for it; resolve with the run's events once `until` is there. */
  async function runUntil(run: string, result: Record<string, unknown>, until: string): Promise<StoredEvent[]> {
    await nats.js.publish(
      `${prefix}.in.${PROJECT}.start`,
      encoder.encode(JSON.stringify({ workflow_run_id: run, project: PROJECT, workflow: 'feature', started_by: 'sam', input: 'x' })),
      { msgID: `start:${PROJECT}:${run}` },
    );
    const handoff = await waitFor(async () => (await currentHandoff(store, PROJECT, run)) ?? undefined, `${run} routed`, { timeoutMs: 15_000 });
    const claimId = await claimHandoff(store, PROJECT, handoff.handoffId, 'issue');
    const full = {
      result_id: `res-${run}`,
      run_id: `ar-${run}`,
      project: PROJECT,
      workflow_run_id: run,
      agent: 'issue',
      produced_at: new Date().toISOString(),
      handoff_id: handoff.handoffId,
      claim_id: claimId,
      ...result,
    };
    await nats.js.publish(`${prefix}.in.${PROJECT}.result.issue`, encoder.encode(JSON.stringify(full)), { msgID: `result:${PROJECT}:${full.result_id}` });
    return waitFor(
      async () => {
        const events = await runEvents(run);
        return events.some((e) => e.type === until) ? events : undefined;
      },
      `${run}: ${until}`,
      { timeoutMs: 15_000 },
    );
  }

  /** The run's next turn: once its current handoff is `agent`'s, claim it and publish `extra` as the result `res2-<run>`. */
  async function nextTurn(run: string, agent: string, extra: Record<string, unknown>): Promise<{ result_id: string }> {
    const next = await waitFor(
      async () => {
        const current = await currentHandoff(store, PROJECT, run);
        return current && current.agent === agent && (await claimHandoff(store, PROJECT, current.handoffId, agent)) !== null ? current : undefined;
      },
      `${run}: ${agent}'s next turn claimed`,
      { timeoutMs: 15_000 },
    );
    const claimId = await claimHandoff(store, PROJECT, next.handoffId, agent);
    const result = { result_id: `res2-${run}`, run_id: `ar2-${run}`, project: PROJECT, workflow_run_id: run, agent, produced_at: new Date().toISOString() };
    await nats.js.publish(
      `${prefix}.in.${PROJECT}.result.${agent}`,
      encoder.encode(JSON.stringify({ ...result, ...extra, handoff_id: next.handoffId, claim_id: claimId })),
      {
        msgID: `result:${PROJECT}:${run}/${result.result_id}`,
      },
    );
    return result;
  }

  /** A run stopped on a budget cap (form raise_cap: raise_cap / deny), its packet in the operator's projections. */
  async function stoppedRun(run: string): Promise<string> {
    const events = await runUntil(run, { body: 'out of steps', stop: { why: 'budget', cap: { name: 'steps', limit: 10, used: 10 } } }, 'run.stopped');
    const packetId = (events.find((e) => e.type === 'run.stopped')!.payload as { packet: { packet_id: string } }).packet.packet_id;
    await waitFor(async () => ((await get(`/v1/projects/${PROJECT}/stops/${packetId}`, olga)).status === 200 ? true : undefined), `${packetId} projected`, {
      timeoutMs: 15_000,
    });
    return packetId;
  }

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    redis = createRedis(REDIS_URL);
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    services.push(await startRouter(env));
    const notifier = await startNotifier(env);
    services.push(notifier);
    base = (await notifier.app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
    const tokens = new TokenStore(redis.client, prefix);
    olga = (await tokens.create({ name: 'olga', role: 'operator', projects: [PROJECT], now: new Date().toISOString() })).token;
    omar = (await tokens.create({ name: 'omar', role: 'operator', projects: [PROJECT], now: new Date().toISOString() })).token;
    const reply = await nats.connection.request(
      `${prefix}.cmd.router.${PROJECT}.publish_definition`,
      encoder.encode(JSON.stringify(twoStepDefinition(PROJECT))),
      { timeout: 10_000 },
    );
    expect(JSON.parse(new TextDecoder().decode(reply.data))).toMatchObject({ ok: true });
  }, 60_000);

  afterAll(() => stopInProcess(services, nats, redis, prefix), 30_000);

  it('two operators answer one stop at the same moment: exactly one 200 (applied, with the run now terminated) and one 409 with the refusal code', async () => {
    const packetId = await stoppedRun('wr-race');
    const path = `/v1/projects/${PROJECT}/stops/${packetId}/answer`;
    const [a, b] = await Promise.all([
      post(path, olga, { answer_id: 'ans-race-olga', action: 'deny', note: 'no' }),
      post(path, omar, { answer_id: 'ans-race-omar', action: 'deny', note: 'no either' }),
    ]);
    const replies = [a, b].sort((x, y) => x.status - y.status);
    expect(replies.map((r) => r.status)).toEqual([200, 409]);
    const [won, lost] = replies as [Reply, Reply];
    expect(won.body).toMatchObject({
      outcome: 'applied',
      project: PROJECT,
      workflow_run_id: 'wr-race',
      event: { type: 'run.resumed' },
      run: { status: 'terminated', workflow_run_id: 'wr-race' },
    });
    // The loser is told why: the code the router recorded (the run no longer has an open stop),
    // or, when the projections already showed the packet answered, the API's own fail-closed check.
    expect(['run_not_stopped', 'stop_already_answered']).toContain(lost.body.error?.code);
    const resumed = (await runEvents('wr-race')).filter((e) => e.type === 'run.resumed');
    expect(resumed.map((e) => (e.payload as { answer_id: string }).answer_id)).toEqual([won.body['answer_id']]);
    if (lost.body.error?.details?.['outcome'] === 'refused') {
      // The router refused it: its status link says so too, with the same code.
      const status = await get(String(lost.body.error.details['status_url']), olga);
      expect(status.body).toMatchObject({ outcome: 'refused', code: lost.body.error.code, event: { type: 'run.result_rejected' } });
      // Its sender retries it as it was: its own outcome again (not the winner's stop_already_answered);
      // the same id with another action is another answer (answer_id_reused).
      const loser =
        lost === a
          ? { token: olga, body: { answer_id: 'ans-race-olga', action: 'deny', note: 'no' } }
          : { token: omar, body: { answer_id: 'ans-race-omar', action: 'deny', note: 'no either' } };
      const retried = await post(path, loser.token, loser.body);
      expect(retried).toMatchObject({ status: 409, body: { error: { code: lost.body.error.code, details: { outcome: 'refused' } } } });
      const changed = await post(path, loser.token, { ...loser.body, action: 'acknowledge' });
      expect(changed.body.error?.code).toBe('answer_id_reused');
    }
    // The winner's status link says applied.
    expect((await get(String(won.body['status_url']), omar)).body).toMatchObject({ outcome: 'applied', event: { type: 'run.resumed' } });
  });

  it('an answer the router refuses (published past the API check) is recorded with its code, and its status link says refused with it; an answer id never sent is 404 answer_not_found, an unknown run 404', async () => {
    const packetId = await stoppedRun('wr-refused');
    // First answer applied…
    const first = await post(`/v1/projects/${PROJECT}/stops/${packetId}/answer`, olga, { answer_id: 'ans-ref-1', action: 'deny' });
    expect(first).toMatchObject({ status: 200, body: { outcome: 'applied' } });
    // …then a second one published straight to the router (as a second notifier would, racing the
    // projections): the router refuses it, and the answer status reads the refusal.
    const request = {
      workflow_run_id: 'wr-refused',
      project: PROJECT,
      actor_role: 'operator',
      answer: {
        kind: 'stop_answer',
        answer: { packet_id: packetId, answer_id: 'ans-ref-2', action: 'deny', answered_by: 'omar', answered_at: new Date().toISOString() },
      },
    };
    await nats.js.publish(`${prefix}.in.${PROJECT}.answer`, encoder.encode(JSON.stringify(request)), { msgID: `answer:${PROJECT}:wr-refused/ans-ref-2` });
    const status = await waitFor(
      async () => {
        const reply = await get(`/v1/projects/${PROJECT}/runs/wr-refused/answers/ans-ref-2`, olga);
        return reply.body['outcome'] === 'refused' ? reply : undefined;
      },
      'the refusal',
      { timeoutMs: 15_000 },
    );
    expect(status.body).toMatchObject({ outcome: 'refused', code: 'run_not_stopped', answer_id: 'ans-ref-2', workflow_run_id: 'wr-refused' });
    // An id no one sent through the API is not found (a polling client stops), not pending forever.
    expect(await get(`/v1/projects/${PROJECT}/runs/wr-refused/answers/never-sent`, olga)).toMatchObject({
      status: 404,
      body: { error: { code: 'answer_not_found' } },
    });
    expect((await get(`/v1/projects/${PROJECT}/runs/nope/answers/ans-ref-2`, olga)).status).toBe(404);
  });

  it("an answer_id the run already took, older than the stream's duplicate window, is 409 answer_id_reused on the run's next hold — never the earlier answer's outcome reported as applied", async () => {
    const run = 'wr-reuse';
    await runUntil(run, { body: 'no sentinel: the run holds' }, 'run.held');
    // The first hold was answered long ago: its message id is one the stream's duplicate window no longer holds.
    const earlier = { answer_id: 'ans-old', action: 'continue', answered_by: 'olga', answered_at: new Date().toISOString() };
    await nats.js.publish(
      `${prefix}.in.${PROJECT}.answer`,
      encoder.encode(JSON.stringify({ workflow_run_id: run, project: PROJECT, actor_role: 'operator', answer: { kind: 'hold_answer', answer: earlier } })),
      { msgID: `answer:${PROJECT}:${run}/ans-old-long-ago` },
    );
    // The run continues to the architect, whose reply holds it again.
    const result = await nextTurn(run, 'architect', { body: 'no sentinel again' });
    await waitFor(async () => ((await runEvents(run)).filter((e) => e.type === 'run.held').length === 2 ? true : undefined), 'held again', {
      timeoutMs: 15_000,
    });
    await waitFor(
      async () =>
        ((await get(`/v1/projects/${PROJECT}/runs/${run}`, olga)).body['run'] as { hold?: { cause?: { id?: string } } } | undefined)?.hold?.cause?.id ===
          result.result_id || undefined,
      'the second hold projected',
      { timeoutMs: 15_000 },
    );
    const path = `/v1/projects/${PROJECT}/runs/${run}/answer`;
    // Another action, or another operator, under the id: another answer, refused before anything is sent.
    const reused = await post(path, olga, { answer_id: 'ans-old', action: 'terminate', note: 'stop it' });
    expect(reused).toMatchObject({
      status: 409,
      body: { error: { code: 'answer_id_reused', details: { answer_id: 'ans-old', used_for: { workflow_run_id: run } } } },
    });
    expect((await post(path, omar, { answer_id: 'ans-old', action: 'continue' })).body.error?.code).toBe('answer_id_reused');
    // The very answer again (same action, same operator): a retry of the first, its outcome again, marked duplicate.
    const firstResumed = (await runEvents(run)).find((e) => e.type === 'run.resumed')!;
    const retried = await post(path, olga, { answer_id: 'ans-old', action: 'continue' });
    expect(retried).toMatchObject({ status: 200, body: { outcome: 'applied', duplicate: true, event: { type: 'run.resumed', seq: firstResumed.seq } } });
    // Nothing was answered: the run is still held by the second hold.
    expect((await runEvents(run)).filter((e) => e.type === 'run.resumed')).toHaveLength(1);
    expect(((await get(`/v1/projects/${PROJECT}/runs/${run}`, olga)).body['run'] as { status: string }).status).toBe('held');
  });

  it('a hold answer the router refused: the same answer again is that refusal again; the same id with another action or target is 409 answer_id_reused', async () => {
    const run = 'wr-hold-refused';
    await runUntil(run, { body: 'no sentinel: the run holds' }, 'run.held');
    await waitFor(
      async () =>
        ((await get(`/v1/projects/${PROJECT}/runs/${run}`, olga)).body['run'] as { status?: string } | undefined)?.status === 'held' ? true : undefined,
      'the hold projected',
      {
        timeoutMs: 15_000,
      },
    );
    const path = `/v1/projects/${PROJECT}/runs/${run}/answer`;
    const refused = await post(path, olga, { answer_id: 'ans-hr-1', action: 'reroute', target: 'nobody' });
    expect(refused).toMatchObject({ status: 409, body: { error: { code: 'resume_target_unknown', details: { outcome: 'refused' } } } });
    // The very answer again: its refusal again.
    expect(await post(path, olga, { answer_id: 'ans-hr-1', action: 'reroute', target: 'nobody' })).toMatchObject({
      status: 409,
      body: { error: { code: 'resume_target_unknown', details: { outcome: 'refused' } } },
    });
    // Another answer under the spent id is not told the first one's refusal.
    for (const other of [{ action: 'terminate' }, { action: 'reroute', target: 'nobody2' }]) {
      expect(await post(path, olga, { answer_id: 'ans-hr-1', ...other })).toMatchObject({
        status: 409,
        body: { error: { code: 'answer_id_reused', details: { answer_id: 'ans-hr-1', used_for: { workflow_run_id: run } } } },
      });
    }
    // Nothing was answered: the run is still held, and a new id answers it.
    expect((await runEvents(run)).filter((e) => e.type === 'run.resumed')).toHaveLength(0);
    expect(await post(path, olga, { answer_id: 'ans-hr-2', action: 'terminate' })).toMatchObject({ status: 200, body: { outcome: 'applied' } });
  });

  it("the same for a stop packet: an id that answered the run's earlier packet, past the window, is 409 answer_id_reused on its next packet", async () => {
    const run = 'wr-reuse-stop';
    const first = await stoppedRun(run);
    const answer = { packet_id: first, answer_id: 'ans-old-stop', action: 'raise_cap', cap: 20, answered_by: 'olga', answered_at: new Date().toISOString() };
    await nats.js.publish(
      `${prefix}.in.${PROJECT}.answer`,
      encoder.encode(JSON.stringify({ workflow_run_id: run, project: PROJECT, actor_role: 'operator', answer: { kind: 'stop_answer', answer } })),
      { msgID: `answer:${PROJECT}:${run}/ans-old-stop-long-ago` },
    );
    await waitFor(async () => ((await runEvents(run)).some((e) => e.type === 'run.resumed') ? true : undefined), 'the first packet answered', {
      timeoutMs: 15_000,
    });
    // The agent takes its turn again and stops again: a second packet.
    await nextTurn(run, 'issue', { body: 'out of steps again', stop: { why: 'budget', cap: { name: 'steps', limit: 20, used: 20 } } });
    const second = await waitFor(
      async () => {
        const stops = (await runEvents(run)).filter((e) => e.type === 'run.stopped');
        return stops.length === 2 ? (stops[1]!.payload as { packet: { packet_id: string } }).packet.packet_id : undefined;
      },
      'stopped again',
      { timeoutMs: 15_000 },
    );
    await waitFor(async () => ((await get(`/v1/projects/${PROJECT}/stops/${second}`, olga)).status === 200 ? true : undefined), 'the second packet projected', {
      timeoutMs: 15_000,
    });
    const reused = await post(`/v1/projects/${PROJECT}/stops/${second}/answer`, olga, { answer_id: 'ans-old-stop', action: 'deny', note: 'no more' });
    expect(reused).toMatchObject({ status: 409, body: { error: { code: 'answer_id_reused' } } });
    expect((await get(`/v1/projects/${PROJECT}/stops/${second}`, olga)).body).toMatchObject({ stop: { status: 'open' } });
    expect((await runEvents(run)).filter((e) => e.type === 'run.resumed')).toHaveLength(1);
  });

  it("a held run answered (terminate): 200 applied with the run's new state", async () => {
    await runUntil('wr-hold', { body: 'no sentinel: the run holds' }, 'run.held');
    await waitFor(
      async () => ((await get(`/v1/projects/${PROJECT}/runs/wr-hold`, olga)).body['run'] as { status?: string } | undefined)?.status === 'held' || undefined,
      'the hold projected',
      { timeoutMs: 15_000 },
    );
    const reply = await post(`/v1/projects/${PROJECT}/runs/wr-hold/answer`, olga, { answer_id: 'ans-hold-e2e', action: 'terminate', note: 'stop here' });
    expect(reply).toMatchObject({
      status: 200,
      body: { outcome: 'applied', run: { status: 'terminated' }, status_url: `/v1/projects/${PROJECT}/runs/wr-hold/answers/ans-hold-e2e` },
    });
  });

  it('a hold answer names the hold it was made for (hold_cause, as the run view and the inbox item show it): another hold is 409 stale_answer', async () => {
    await runUntil('wr-hold2', { body: 'no sentinel: the run holds' }, 'run.held');
    const hold = await waitFor(
      async () => ((await get(`/v1/projects/${PROJECT}/runs/wr-hold2`, olga)).body['run'] as { hold?: { cause?: unknown } } | undefined)?.hold ?? undefined,
      'the hold projected',
      { timeoutMs: 15_000 },
    );
    expect(hold.cause).toEqual({ kind: 'result', id: 'res-wr-hold2' });
    const items = (await get(`/v1/inbox?project=${PROJECT}&kind=hold`, olga)).body['items'] as Array<{ workflow_run_id?: string; cause?: unknown }>;
    expect(items.find((i) => i.workflow_run_id === 'wr-hold2')?.cause).toEqual({ kind: 'result', id: 'res-wr-hold2' });
    const stale = await post(`/v1/projects/${PROJECT}/runs/wr-hold2/answer`, olga, {
      answer_id: 'ans-hold-stale',
      action: 'terminate',
      hold_cause: { kind: 'result', id: 'res-an-earlier-one' },
    });
    expect(stale).toMatchObject({ status: 409, body: { error: { code: 'stale_answer', details: { outcome: 'refused' } } } });
    const current = await post(`/v1/projects/${PROJECT}/runs/wr-hold2/answer`, omar, {
      answer_id: 'ans-hold-current',
      action: 'terminate',
      hold_cause: hold.cause,
    });
    expect(current).toMatchObject({ status: 200, body: { outcome: 'applied', run: { status: 'terminated' } } });
  });

  it('baton answer: exit 0 when applied (saying so), exit 1 with the refusal code when another answer won', async () => {
    const packetId = await stoppedRun('wr-cli');
    const run = async (token: string, answerId: string) => {
      const io = bufferedIo();
      const code = await baton(['answer', packetId, '--project', PROJECT, '--action', 'deny', '--answer-id', answerId], {
        io,
        env: { NATS_URL, REDIS_URL, BATON_PREFIX: prefix, BATON_API_URL: base, BATON_TOKEN: token, BATON_OPERATOR: 'x' },
      });
      return { code, out: io.out(), err: io.err() };
    };
    const [a, b] = await Promise.all([run(olga, 'ans-cli-1'), run(omar, 'ans-cli-2')]);
    const results = [a, b].sort((x, y) => x.code - y.code);
    expect(results.map((r) => r.code)).toEqual([0, 1]);
    expect(results[0]!.out).toMatch(/^applied .*: deny; run wr-cli is now terminated/);
    expect(results[1]!.err).toMatch(/the answer was refused: (run_not_stopped|stop_already_answered):/);
  });
});
