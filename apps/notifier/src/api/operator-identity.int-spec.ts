import { randomBytes } from 'node:crypto';
import { createEventRegistry, ledgerCommandSubject, Principals, Subjects } from '@baton/contracts';
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
 * name is 409 answer_id_reused, not a duplicate of the first. A body that names its actor
 * (`answered_by`, `actor`) may only repeat the token's name: another is 403 identity_mismatch and
 * nothing is sent (audit F5); a role that may not act is told which role may (`details.required_role`,
 * F4); a stop answer's action is one of the stop form's buttons — accept / rework are a handback's
 * decision, refused 400 schema_violation (F1). The notifier runs in process against
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

  /** Every message on a subject while `act` runs (core NATS sees what JetStream stores and what the ledger is asked). */
  const heardOn = async (subject: string, act: () => Promise<void>, reply?: unknown): Promise<Array<Record<string, unknown>>> => {
    const heard: Array<Record<string, unknown>> = [];
    const sub = nats.connection.subscribe(subject, {
      callback: (_err, msg) => {
        heard.push(JSON.parse(new TextDecoder().decode(msg.data)) as Record<string, unknown>);
        if (reply !== undefined && msg.reply) msg.respond(new TextEncoder().encode(JSON.stringify(reply)));
      },
    });
    await nats.connection.flush();
    try {
      await act();
      await nats.connection.flush();
    } finally {
      sub.unsubscribe();
    }
    return heard;
  };

  const post = async (token: string, path: string, body: Record<string, unknown>): Promise<Reply> => {
    const response = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(20_000),
    });
    return { status: response.status, body: (await response.json()) as Reply['body'] };
  };

  const refusal = (reply: Reply) => ({ status: reply.status, code: reply.body.error?.code, details: reply.body.error?.details });

  it("a body's answered_by may only repeat the token's name: another is 403 identity_mismatch and nothing is published; the token's own name is taken", async () => {
    const answers = Subjects.operatorAnswer(prefix, 'demo');
    let claimed: Reply | undefined;
    const heard = await heardOn(answers, async () => {
      claimed = await answer(olga.token, { answer_id: 'claims-1', action: 'deny', note: 'no', answered_by: 'mallory' });
    });
    expect(refusal(claimed!)).toEqual({ status: 403, code: 'identity_mismatch', details: { field: 'answered_by', actor: 'olga' } });
    expect(claimed!.body.error?.message).toContain('mallory');
    expect(heard).toEqual([]);
    // Nothing was sent under the id: the API knows no answer claims-1.
    expect((await get('/v1/projects/demo/runs/wr-a/answers/claims-1', `Bearer ${olga.token}`)).body.error?.code).toBe('answer_not_found');

    let own: Reply | undefined;
    const published = await heardOn(answers, async () => {
      own = await answer(olga.token, { answer_id: 'claims-2', action: 'deny', note: 'no', answered_by: 'olga' });
    });
    expect(own).toMatchObject({ status: 202, body: { answer_id: 'claims-2' } });
    expect(published).toEqual([
      expect.objectContaining({ answer: { kind: 'stop_answer', answer: expect.objectContaining({ answer_id: 'claims-2', answered_by: 'olga' }) } }),
    ]);

    // A hold answer likewise: refused before the run is looked at; with the token's name it reaches the run check (wr-a is stopped, not held).
    const hold = await heardOn(answers, async () => {
      claimed = await post(olga.token, '/v1/projects/demo/runs/wr-a/answer', { answer_id: 'claims-3', action: 'continue', answered_by: 'mallory' });
    });
    expect(refusal(claimed!)).toEqual({ status: 403, code: 'identity_mismatch', details: { field: 'answered_by', actor: 'olga' } });
    expect(hold).toEqual([]);
    const held = await post(olga.token, '/v1/projects/demo/runs/wr-a/answer', { answer_id: 'claims-3', action: 'continue', answered_by: 'olga' });
    expect(held.body.error?.code).toBe('run_not_held');
  });

  it("a handback decision's or an abandon's actor may only repeat the token's name: another is 403 identity_mismatch and the ledger is not asked", async () => {
    const ledger = (command: string) => ledgerCommandSubject(prefix, 'demo', Principals.operator('notifier'), command);
    const ended = { ok: false, error: { code: 'handoff_not_pending', kind: 'wrong_state', message: 'decided already' } };
    for (const [command, path, body] of [
      ['decide_handback', '/v1/projects/demo/handoffs/hb-claims/decision', { decision: 'accept', idempotency_key: 'k-claims' }],
      ['abandon', '/v1/projects/demo/handoffs/ho-claims/abandon', { reason: 'not needed', idempotency_key: 'k-claims' }],
    ] as const) {
      let claimed: Reply | undefined;
      const asked = await heardOn(
        ledger(command),
        async () => {
          claimed = await post(olga.token, path, { ...body, actor: 'mallory' });
        },
        ended,
      );
      expect({ command, ...refusal(claimed!) }).toEqual({ command, status: 403, code: 'identity_mismatch', details: { field: 'actor', actor: 'olga' } });
      expect({ command, asked }).toEqual({ command, asked: [] });

      let own: Reply | undefined;
      const relayed = await heardOn(
        ledger(command),
        async () => {
          own = await post(olga.token, path, { ...body, actor: 'olga' });
        },
        ended,
      );
      expect({ command, code: own!.body.error?.code }).toEqual({ command, code: 'handoff_not_pending' });
      expect(relayed).toEqual([expect.objectContaining({ ...body, actor: 'olga', actor_role: 'operator' })]);
    }
  });

  it('role_forbidden names the role that may act: details.required_role operator for a viewer, admin for the kill switch', async () => {
    const vera = await tokens.create({ name: 'vera', role: 'viewer', projects: ['demo'], now: new Date().toISOString() });
    const viewerAnswer = await answer(vera.token, { action: 'deny' });
    expect(refusal(viewerAnswer)).toEqual({ status: 403, code: 'role_forbidden', details: { role: 'viewer', required_role: 'operator' } });
    expect(viewerAnswer.body.error?.message).toContain('operator or admin role');
    const redeliver = await post(vera.token, '/v1/projects/demo/notices/nt-1/redeliver', {});
    expect(refusal(redeliver)).toEqual({ status: 403, code: 'role_forbidden', details: { role: 'viewer', required_role: 'operator' } });
    expect(redeliver.body.error?.message).toContain('redelivering a notice');
    // The role is checked before the body is read: a viewer's malformed body is the same 403, not a 400 about the body.
    const malformed = await post(vera.token, '/v1/projects/demo/notices/nt-1/redeliver', { unknown_field: true });
    expect(refusal(malformed)).toEqual({ status: 403, code: 'role_forbidden', details: { role: 'viewer', required_role: 'operator' } });
    for (const [token, role] of [
      [olga.token, 'operator'],
      [vera.token, 'viewer'],
    ] as const) {
      for (const control of ['pause', 'resume']) {
        const reply = await post(token, `/v1/projects/demo/${control}`, { reason: 'incident' });
        expect({ control, ...refusal(reply) }).toEqual({ control, status: 403, code: 'role_forbidden', details: { role, required_role: 'admin' } });
        expect(reply.body.error?.message).toContain('admin role');
      }
    }
  });

  it("a stop answer is one of the stop form's buttons: accept and rework (a handback's decision) are 400 schema_violation on action, and nothing is published", async () => {
    const answers = Subjects.operatorAnswer(prefix, 'demo');
    for (const action of ['accept', 'rework']) {
      let reply: Reply | undefined;
      const heard = await heardOn(answers, async () => {
        reply = await answer(olga.token, { answer_id: `hb-word-${action}`, action, note: 'add the tests' });
      });
      expect({ action, status: reply!.status, code: reply!.body.error?.code }).toEqual({ action, status: 400, code: 'schema_violation' });
      const issues = (reply!.body.error as { issues?: Array<{ path: string; message: string }> }).issues ?? [];
      expect(issues).toEqual([expect.objectContaining({ path: 'action', message: expect.stringContaining('/decision') })]);
      expect(heard).toEqual([]);
    }
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
