import { randomBytes } from 'node:crypto';
import { createEventRegistry } from '@baton/contracts';
import { runDecider } from '@baton/domain';
import { batonTopology, connectNats, JetStreamEventStore, provision, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { createRedis, scenarioSteps, type RedisHandle } from '@baton/projections';
import { TokenStore } from '../auth/token-store';
import { startNotifier } from '../main';
import { startPrivateServer, type PrivateServer } from './private-server.int-support';

/*
 * An operator is a token (audit F1, F10): a 401 says why in `details.reason` (missing, malformed,
 * unknown, expired, revoked — a revoked or expired token only to the holder of its secret); an
 * operator whose token is named like the stopped agent is a person, and answers its stop; an
 * answer_id is its sender token's, so the same answer sent again by another token with the same
 * name is 409 answer_id_reused, not a duplicate of the first. The notifier runs in process against
 * a private nats-server (no router: answers stay pending); Redis is the shared one, under this
 * test's own key prefix.
 */

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const PACKET = 'stop-r-wr-a:res-a1';

describe('operator identity in the API: typed 401 reasons, token names (private nats-server)', () => {
  const prefix = `oi${randomBytes(5).toString('hex')}`;
  let server: PrivateServer;
  let nats: NatsHandle;
  let redis: RedisHandle;
  let service: RunningService;
  let tokens: TokenStore;
  let base: string;
  let olga: { token: string; id: string };

  beforeAll(async () => {
    server = await startPrivateServer('nats-server');
    nats = await connectNats({ servers: server.url, reconnect: false });
    redis = createRedis();
    await provision(nats.jsm, { streams: batonTopology(prefix).streams });
    // Run wr-a of the projections' scenario: started, then stopped on policy with a frozen refund.
    const events = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    let n = 0;
    for (const step of scenarioSteps().filter((s) => s.aggregate === 'run' && s.id === 'wr-a')) {
      const meta = {
        commandId: `cmd-${++n}`,
        occurredAt: step.command.metadata.now,
        actor: step.actor,
        origin: step.origin,
        causationId: null,
        correlationId: step.id,
      };
      const result = await events.handleCommand({ project: 'demo', kind: 'run', id: step.id }, runDecider, step.command, meta);
      if (!result.ok) throw new Error(`${step.command.type} refused: ${result.error.code}`);
    }
    service = await startNotifier({
      ...process.env,
      NATS_URL: server.url,
      BATON_PREFIX: prefix,
      HTTP_PORT: '0',
      LOG_LEVEL: 'error',
      NOTIFIER_ANSWER_WAIT_MS: '200',
      NOTIFIER_AUTH_FAILURES_PER_MINUTE: '0',
    });
    base = (await service.app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
    tokens = new TokenStore(redis.client, prefix);
    const made = await tokens.create({ name: 'olga', role: 'operator', projects: ['demo'], now: new Date().toISOString() });
    olga = { token: made.token, id: made.info.token_id };
    const deadline = Date.now() + 15_000;
    while ((await fetch(`${base}/v1/projects/demo/stops/${PACKET}`, { headers: { authorization: `Bearer ${olga.token}` } })).status !== 200) {
      if (Date.now() > deadline) throw new Error('the stop packet never reached the projections');
      await sleep(100);
    }
  }, 60_000);

  afterAll(async () => {
    await service?.stop().catch(() => undefined);
    await nats?.drain().catch(() => undefined);
    await server?.remove();
    for await (const batch of redis.client.scanStream({ match: `${prefix}:*`, count: 500 })) {
      const keys = batch as string[];
      if (keys.length > 0) await redis.client.unlink(...keys);
    }
    await redis?.close().catch(() => undefined);
  }, 30_000);

  type Reply = { status: number; body: Record<string, unknown> & { error?: { code: string; message: string; details?: Record<string, unknown> } } };

  const get = async (path: string, authorization?: string): Promise<Reply> => {
    const response = await fetch(`${base}${path}`, { headers: authorization !== undefined ? { authorization } : {} });
    return { status: response.status, body: (await response.json()) as Reply['body'] };
  };

  const answer = async (token: string, body: Record<string, unknown>): Promise<Reply> => {
    const response = await fetch(`${base}/v1/projects/demo/stops/${PACKET}/answer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(20_000),
    });
    return { status: response.status, body: (await response.json()) as Reply['body'] };
  };

  it('a 401 says why in details.reason: missing, malformed, unknown (a wrong secret too), expired, revoked — and expired or revoked only with the right secret', async () => {
    const reasonOf = async (authorization?: string) => {
      const reply = await get('/v1/inbox', authorization);
      return { status: reply.status, code: reply.body.error?.code, details: reply.body.error?.details };
    };
    expect(await reasonOf()).toEqual({ status: 401, code: 'unauthenticated', details: { reason: 'missing' } });
    expect(await reasonOf('Bearer nope')).toEqual({ status: 401, code: 'unauthenticated', details: { reason: 'malformed' } });
    // An Authorization header that is not `Bearer <token>` is a malformed credential, not a missing one.
    expect(await reasonOf('Basic b2xnYTpwdw==')).toEqual({ status: 401, code: 'unauthenticated', details: { reason: 'malformed' } });
    const stranger = `bt_0123456789abcdef_${'A'.repeat(43)}`;
    expect(await reasonOf(`Bearer ${stranger}`)).toEqual({ status: 401, code: 'unauthenticated', details: { reason: 'unknown' } });
    const wrongSecret = `bt_${olga.id}_${'B'.repeat(43)}`;
    expect(await reasonOf(`Bearer ${wrongSecret}`)).toEqual({ status: 401, code: 'unauthenticated', details: { reason: 'unknown' } });

    const now = Date.now();
    const brief = await tokens.create({
      name: 'brie',
      role: 'viewer',
      projects: ['demo'],
      now: new Date(now).toISOString(),
      expiresAt: new Date(now + 1000).toISOString(),
    });
    expect((await get('/v1/inbox', `Bearer ${brief.token}`)).status).toBe(200);
    await sleep(1100);
    expect(await reasonOf(`Bearer ${brief.token}`)).toEqual({ status: 401, code: 'unauthenticated', details: { reason: 'expired' } });
    expect(await reasonOf(`Bearer bt_${brief.info.token_id}_${'C'.repeat(43)}`)).toEqual({
      status: 401,
      code: 'unauthenticated',
      details: { reason: 'unknown' },
    });

    const gone = await tokens.create({ name: 'gus', role: 'viewer', projects: ['demo'], now: new Date().toISOString() });
    await tokens.revoke(gone.info.token_id, new Date().toISOString());
    expect(await reasonOf(`Bearer ${gone.token}`)).toEqual({ status: 401, code: 'unauthenticated', details: { reason: 'revoked' } });
    expect(await reasonOf(`Bearer bt_${gone.info.token_id}_${'D'.repeat(43)}`)).toEqual({
      status: 401,
      code: 'unauthenticated',
      details: { reason: 'unknown' },
    });
  });

  it('an operator whose token is named like the stopped agent is a person: its answer is taken (not answer_forbidden)', async () => {
    const stop = (await get(`/v1/projects/demo/stops/${PACKET}`, `Bearer ${olga.token}`)).body as { stop?: { agent?: string }; agent?: string };
    const agent = stop.stop?.agent ?? stop.agent;
    expect(agent).toEqual(expect.any(String));
    const namesake = await tokens.create({ name: agent!, role: 'operator', projects: ['demo'], now: new Date().toISOString() });
    const reply = await answer(namesake.token, { answer_id: 'namesake-1', action: 'deny', note: 'a person, not the agent' });
    expect({ status: reply.status, code: reply.body.error?.code }).toEqual({ status: 202, code: undefined });
    expect(reply.body).toMatchObject({ accepted: true, answer_id: 'namesake-1', outcome: 'pending' });
  });

  it("an answer_id is its token's: a retry from the same token is a duplicate, the same answer from another token of the same name is 409 answer_id_reused", async () => {
    const body = { answer_id: 'same-name-1', action: 'deny', note: 'no refund' };
    expect(await answer(olga.token, body)).toMatchObject({ status: 202, body: { answer_id: 'same-name-1', duplicate: false } });
    expect(await answer(olga.token, body)).toMatchObject({ status: 202, body: { answer_id: 'same-name-1', duplicate: true } });

    // The same person, a new token (rotated): the name is the same, the sender is not.
    const rotated = await tokens.create({ name: 'olga', role: 'operator', projects: ['demo'], now: new Date().toISOString(), ifNameTaken: 'rotate' });
    expect(rotated.rotated).toEqual([olga.id]);
    const other = await answer(rotated.token, body);
    expect(other).toMatchObject({
      status: 409,
      body: { error: { code: 'answer_id_reused', details: { answer_id: 'same-name-1', reason: 'another_token', used_for: { workflow_run_id: 'wr-a' } } } },
    });
    // A new answer_id from the new token is its own answer.
    expect(await answer(rotated.token, { ...body, answer_id: 'same-name-2' })).toMatchObject({ status: 202, body: { duplicate: false } });
  });
});
