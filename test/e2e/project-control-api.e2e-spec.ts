import { randomBytes } from 'node:crypto';
import { createEventRegistry } from '@baton/contracts';
import { connectNats, JetStreamEventStore, type NatsHandle } from '@baton/eventstore';
import { createRedis, type RedisHandle } from '@baton/projections';
import type { RunningService } from '@baton/platform';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the services run in this process (no build needed)
import { startRouter } from '../../apps/router/src/router.app';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the services run in this process (no build needed)
import { startLedger } from '../../apps/ledger/src/ledger';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the services run in this process (no build needed)
import { startNotifier } from '../../apps/notifier/src/main';
// eslint-disable-next-line @nx/enforce-module-boundaries -- tokens are made as `baton token create` would
import { TokenStore } from '../../apps/notifier/src/auth/token-store';
import { stopInProcess, twoStepDefinition } from './support';

/*
 * A project's kill switch through the operator API: `GET /v1/projects/{project}` shows the
 * published definition in short and the kill switch; `POST …/pause` and `…/resume` are relayed to
 * the ledger as the token's admin (`op.notifier`), which decides. Router (for the definition),
 * ledger and notifier run in this process against real NATS and Redis.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const PROJECT = 'kops';
const encoder = new TextEncoder();
const decoder = new TextDecoder();

interface Reply {
  status: number;
  body: Record<string, unknown> & { error?: { code: string; message: string; details?: Record<string, unknown> } };
}

describe('the project kill switch through the operator API (router + ledger + notifier in process, real NATS and Redis)', () => {
  const prefix = `pc${randomBytes(5).toString('hex')}`;
  const services: RunningService[] = [];
  let nats: NatsHandle;
  let redis: RedisHandle;
  let base: string;
  const tokens: Record<'ada' | 'olga' | 'vic' | 'otto', string> = { ada: '', olga: '', vic: '', otto: '' };
  const env = { ...process.env, NATS_URL, REDIS_URL, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: 'error', BATON_NATS_AUTH: 'none' };

  const call = async (who: keyof typeof tokens, method: 'GET' | 'POST', path: string, body?: unknown): Promise<Reply> => {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${tokens[who]}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: response.status, body: (await response.json()) as Reply['body'] };
  };

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    redis = createRedis(REDIS_URL);
    services.push(await startLedger(env), await startRouter(env));
    const notifier = await startNotifier(env);
    services.push(notifier);
    base = (await notifier.app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
    const store = new TokenStore(redis.client, prefix);
    const now = new Date().toISOString();
    tokens.ada = (await store.create({ name: 'ada', role: 'admin', projects: '*', now })).token;
    tokens.olga = (await store.create({ name: 'olga', role: 'operator', projects: [PROJECT], now })).token;
    tokens.vic = (await store.create({ name: 'vic', role: 'viewer', projects: [PROJECT], now })).token;
    tokens.otto = (await store.create({ name: 'otto', role: 'operator', projects: ['elsewhere'], now })).token;
    const reply = await nats.connection.request(
      `${prefix}.cmd.router.${PROJECT}.publish_definition`,
      encoder.encode(JSON.stringify(twoStepDefinition(PROJECT))),
      {
        timeout: 10_000,
      },
    );
    expect(JSON.parse(decoder.decode(reply.data))).toMatchObject({ ok: true });
  }, 60_000);

  afterAll(() => stopInProcess(services, nats, redis, prefix), 30_000);

  it('GET shows the definition and kill switch to anyone who may see the project; 404 for a project Baton holds nothing of or the token may not see', async () => {
    const shown = await call('vic', 'GET', `/v1/projects/${PROJECT}`);
    expect(shown).toMatchObject({
      status: 200,
      body: {
        project: PROJECT,
        definition: { publishes: 1, lead: 'lena', agents: ['issue', 'architect'], workflows: ['feature'], meshes: [], accepts_handoffs_from: [] },
        control: { project: PROJECT, status: 'active', version: 0 },
      },
    });
    expect(await call('ada', 'GET', '/v1/projects/nothing-here')).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
    expect(await call('otto', 'GET', `/v1/projects/${PROJECT}`)).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
    expect(await call('vic', 'GET', `/v1/projects/${PROJECT}?verbose=1`)).toMatchObject({ status: 400 });
  });

  it('only an admin pauses and resumes; the ledger decides and records the admin; retries, repeats and unknown projects get typed refusals', async () => {
    // Readers and operators may not touch the kill switch; nothing is sent.
    for (const who of ['vic', 'olga'] as const) {
      // The role is judged before the body: a non-admin is told it may not, not the schema.
      expect(await call(who, 'POST', `/v1/projects/${PROJECT}/pause`, { bogus: 1 })).toMatchObject({
        status: 403,
        body: { error: { code: 'role_forbidden' } },
      });
      expect(await call(who, 'POST', `/v1/projects/${PROJECT}/pause`, { reason: 'x' })).toMatchObject({
        status: 403,
        body: { error: { code: 'role_forbidden' } },
      });
    }
    expect(await call('otto', 'POST', `/v1/projects/${PROJECT}/pause`, { reason: 'x' })).toMatchObject({ status: 404 });
    expect(await call('ada', 'POST', `/v1/projects/${PROJECT}/pause`, {})).toMatchObject({ status: 400, body: { error: { code: 'schema_violation' } } });

    const paused = await call('ada', 'POST', `/v1/projects/${PROJECT}/pause`, { reason: 'incident 12', idempotency_key: 'p-1' });
    expect(paused).toMatchObject({ status: 200, body: { events: 1, project: { status: 'paused', paused_by: 'ada', reason: 'incident 12' } } });
    // The same key and body: a retry, nothing stored. Another reason under it: refused.
    expect(await call('ada', 'POST', `/v1/projects/${PROJECT}/pause`, { reason: 'incident 12', idempotency_key: 'p-1' })).toMatchObject({
      status: 200,
      body: { events: 0, project: { status: 'paused' } },
    });
    expect(await call('ada', 'POST', `/v1/projects/${PROJECT}/pause`, { reason: 'incident 13', idempotency_key: 'p-1' })).toMatchObject({
      status: 409,
      body: { error: { code: 'idempotency_key_reused', details: { project: PROJECT } } },
    });
    expect(await call('ada', 'POST', `/v1/projects/${PROJECT}/pause`, { reason: 'again' })).toMatchObject({
      status: 409,
      body: { error: { code: 'project_already_paused' } },
    });
    expect(await call('vic', 'GET', `/v1/projects/${PROJECT}`)).toMatchObject({
      status: 200,
      body: { control: { status: 'paused', paused_by: 'ada', reason: 'incident 12', version: 1 } },
    });

    expect(await call('ada', 'POST', `/v1/projects/${PROJECT}/resume`, { reason: 'fixed' })).toMatchObject({
      status: 200,
      body: { events: 1, project: { status: 'active', version: 2 } },
    });
    expect(await call('ada', 'POST', `/v1/projects/${PROJECT}/resume`, {})).toMatchObject({ status: 409, body: { error: { code: 'project_not_paused' } } });

    // A project with no published definition: refused unless forced.
    expect(await call('ada', 'POST', '/v1/projects/not-set-up/pause', { reason: 'early' })).toMatchObject({
      status: 404,
      body: { error: { code: 'project_unknown', details: { project: 'not-set-up' } } },
    });
    expect(await call('ada', 'POST', '/v1/projects/not-set-up/pause', { reason: 'early', force: true })).toMatchObject({
      status: 200,
      body: { project: { status: 'paused' } },
    });
    expect(await call('ada', 'GET', '/v1/projects/not-set-up')).toMatchObject({ status: 200, body: { definition: null, control: { status: 'paused' } } });

    // The ledger recorded the admin the token names, relayed by the notifier.
    const store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    const events = (await store.read({ project: PROJECT, kind: 'project', id: 'control' })).events;
    expect(events.map((e) => [e.type, e.actor])).toEqual([
      ['project.paused', 'ada'],
      ['project.resumed', 'ada'],
    ]);
  });
});
