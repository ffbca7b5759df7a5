import { randomBytes } from 'node:crypto';
import { createEventRegistry, Principals } from '@baton/contracts';
import { connectNats, JetStreamEventStore, LedgerClient, type NatsHandle } from '@baton/eventstore';
import { createRedis, type RedisHandle } from '@baton/projections';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the services run in this process (no build needed)
import { startRouter } from '../../apps/router/src/router.app';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the services run in this process (no build needed)
import { startLedger } from '../../apps/ledger/src/ledger';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the services run in this process (no build needed)
import { startNotifier } from '../../apps/notifier/src/main';
// eslint-disable-next-line @nx/enforce-module-boundaries -- tokens are made as `baton token create` would
import { TokenStore } from '../../apps/notifier/src/auth/token-store';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the CLI's entry point, called in process
import { main } from '../../apps/cli/src/main';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the CLI's buffered output
import { bufferedIo } from '../../apps/cli/src/output';
import { stopInProcess, twoStepDefinition } from './support';

/*
 * An operator withdraws (abandons) an open handoff through the operator API and `baton abandon`:
 * the notifier relays the ledger's `abandon` as the token's operator (`op.notifier`, the token's
 * name and role), the ledger decides at once, and the API answers with its outcome or its refusal.
 * A run whose step's handoff is abandoned is held for a person (`handoff_abandoned`). Router,
 * ledger and notifier run in this process against real NATS and Redis.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const PROJECT = 'abops';
const OTHER = 'abother';
const encoder = new TextEncoder();
const decoder = new TextDecoder();

interface Reply {
  status: number;
  body: Record<string, unknown> & { error?: { code: string; message: string; details?: Record<string, unknown> } };
}

describe('operators abandon handoffs through the API and the CLI (router + ledger + notifier in process, real NATS and Redis)', () => {
  const prefix = `ab${randomBytes(5).toString('hex')}`;
  const services: RunningService[] = [];
  let nats: NatsHandle;
  let redis: RedisHandle;
  let store: JetStreamEventStore;
  let base: string;
  const tokens: Record<'ada' | 'olga' | 'vic', string> = { ada: '', olga: '', vic: '' };
  const env = { ...process.env, NATS_URL, REDIS_URL, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: 'error', BATON_NATS_AUTH: 'none' };

  const post = async (who: keyof typeof tokens, path: string, body: unknown): Promise<Reply> => {
    const response = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tokens[who]}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Reply['body'] };
  };

  const baton = async (who: keyof typeof tokens, ...argv: string[]) => {
    const io = bufferedIo();
    const code = await main(argv, {
      io,
      env: { NATS_URL, REDIS_URL, BATON_PREFIX: prefix, BATON_NATS_AUTH: 'none', BATON_API_URL: base, BATON_TOKEN: tokens[who], BATON_OPERATOR: 'olga' },
    });
    return { code, out: io.out(), err: io.err() };
  };

  /** A pending handoff from issue to architect (agents of the published definition), created by issue in `project`. */
  const create = async (project: string, id: string) => {
    const issue = new LedgerClient(nats, prefix, { as: Principals.agent(project, 'issue') });
    const created = await issue.create(project, {
      handoff_id: id,
      from_agent: 'issue',
      to_agent: 'architect',
      summary: `work ${id}`,
      idempotency_key: `create-${id}`,
    });
    if (!created.ok) throw new Error(created.error.code);
  };

  /** Wait until the notifier's projections hold the handoff (the API resolves ids through them). */
  const projected = (project: string, id: string) =>
    waitFor(
      async () =>
        (await fetch(`${base}/v1/projects/${project}/handoffs/${id}`, { headers: { authorization: `Bearer ${tokens.ada}` } })).status === 200
          ? true
          : undefined,
      `${project}/${id} projected`,
      { timeoutMs: 15_000 },
    );

  const handoffEvents = async (project: string, id: string) => (await store.read({ project, kind: 'handoff', id })).events;
  const statusOf = async (project: string, id: string) =>
    (await new LedgerClient(nats, prefix, { as: Principals.agent(project, 'issue') }).get(project, id))?.status;

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    redis = createRedis(REDIS_URL);
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    services.push(await startLedger(env), await startRouter(env));
    const notifier = await startNotifier(env);
    services.push(notifier);
    base = (await notifier.app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
    const tokenStore = new TokenStore(redis.client, prefix);
    const now = new Date().toISOString();
    tokens.ada = (await tokenStore.create({ name: 'ada', role: 'admin', projects: '*', now })).token;
    tokens.olga = (await tokenStore.create({ name: 'olga', role: 'operator', projects: [PROJECT], now })).token;
    tokens.vic = (await tokenStore.create({ name: 'vic', role: 'viewer', projects: [PROJECT], now })).token;
    const reply = await nats.connection.request(
      `${prefix}.cmd.router.${PROJECT}.publish_definition`,
      encoder.encode(JSON.stringify(twoStepDefinition(PROJECT))),
      { timeout: 10_000 },
    );
    expect(JSON.parse(decoder.decode(reply.data))).toMatchObject({ ok: true });
  }, 60_000);

  afterAll(() => stopInProcess(services, nats, redis, prefix), 30_000);

  it('an operator abandons a pending handoff: 200 applied, abandoned by the token; a retry is 200 with 0 events, another reason under the key 409 idempotency_key_reused, a new abandon 409 handoff_not_open', async () => {
    await create(PROJECT, 'h-1');
    await projected(PROJECT, 'h-1');
    const path = `/v1/projects/${PROJECT}/handoffs/h-1/abandon`;

    // A viewer may not, whatever it sends; a body without a reason (or a blank one) is refused; nothing is sent.
    for (const body of [{ reason: 'not needed' }, { bogus: 1 }]) {
      expect(await post('vic', path, body)).toMatchObject({ status: 403, body: { error: { code: 'role_forbidden' } } });
    }
    for (const body of [{}, { reason: '   ' }, { reason: 'x', extra: 1 }]) {
      expect(await post('olga', path, body)).toMatchObject({ status: 400, body: { error: { code: 'schema_violation' } } });
    }
    expect(await statusOf(PROJECT, 'h-1')).toBe('pending');

    // The token names who abandons: a body naming another actor is refused 403 identity_mismatch and nothing is sent;
    // one repeating the token's name is taken.
    expect(await post('olga', path, { reason: 'no longer needed', idempotency_key: 'ab-1', actor: 'mallory' })).toMatchObject({
      status: 403,
      body: { error: { code: 'identity_mismatch', details: { field: 'actor', actor: 'olga' } } },
    });
    expect(await statusOf(PROJECT, 'h-1')).toBe('pending');
    const abandoned = await post('olga', path, { reason: 'no longer needed', idempotency_key: 'ab-1', actor: 'olga' });
    expect(abandoned).toMatchObject({ status: 200, body: { outcome: 'applied', events: 1, handoff: { id: 'h-1', project: PROJECT, status: 'abandoned' } } });
    const recorded = (await handoffEvents(PROJECT, 'h-1')).filter((e) => e.type === 'handoff.abandoned');
    expect(recorded.map((e) => e.payload)).toEqual([expect.objectContaining({ abandoned_by: 'olga', reason: 'no longer needed', idempotency_key: 'ab-1' })]);

    // The same key and reason: the retry the key is for, nothing stored.
    expect(await post('olga', path, { reason: 'no longer needed', idempotency_key: 'ab-1' })).toMatchObject({
      status: 200,
      body: { outcome: 'applied', events: 0, handoff: { status: 'abandoned' } },
    });
    // The same key with another reason: not an abandon anyone made.
    expect(await post('olga', path, { reason: 'wrong ticket', idempotency_key: 'ab-1' })).toMatchObject({
      status: 409,
      body: {
        error: {
          code: 'idempotency_key_reused',
          details: {
            idempotency_key: 'ab-1',
            command: 'abandon',
            outcome: 'refused',
            handoff_id: 'h-1',
            project: PROJECT,
            abandoned_reason: 'no longer needed',
          },
        },
      },
    });
    // A new abandon of a handoff that ended.
    expect(await post('olga', path, { reason: 'again' })).toMatchObject({
      status: 409,
      body: { error: { code: 'handoff_not_open', details: { outcome: 'refused', handoff_id: 'h-1', project: PROJECT } } },
    });
    expect((await handoffEvents(PROJECT, 'h-1')).filter((e) => e.type === 'handoff.abandoned')).toHaveLength(1);
  });

  it("a handoff the projections have not applied yet (created milliseconds ago): the project route asks the ledger, which abandons it; one that exists nowhere is the ledger's 404; the id-only route, which has only the projections, stays 404", async () => {
    await create(PROJECT, 'h-fresh');
    await projected(PROJECT, 'h-fresh');
    // As if the projection had not applied handoff.created yet: its folded state is not there.
    const keys: string[] = [];
    for await (const batch of redis.client.scanStream({ match: `${prefix}*:hs:${PROJECT}:h-fresh`, count: 1000 })) keys.push(...(batch as string[]));
    expect(keys.length).toBeGreaterThan(0);
    await redis.client.del(...keys);
    expect((await fetch(`${base}/v1/projects/${PROJECT}/handoffs/h-fresh`, { headers: { authorization: `Bearer ${tokens.ada}` } })).status).toBe(404);

    const applied = await post('olga', `/v1/projects/${PROJECT}/handoffs/h-fresh/abandon`, { reason: 'withdrawn at once' });
    expect(applied).toMatchObject({ status: 200, body: { outcome: 'applied', handoff: { id: 'h-fresh', status: 'abandoned' } } });
    expect(await statusOf(PROJECT, 'h-fresh')).toBe('abandoned');

    expect(await post('olga', `/v1/projects/${PROJECT}/handoffs/h-nowhere/abandon`, { reason: 'no such work' })).toMatchObject({
      status: 404,
      body: { error: { code: 'not_found' } },
    });
    expect(await post('olga', '/v1/handoffs/h-nowhere/abandon', { reason: 'no such work' })).toMatchObject({
      status: 404,
      body: { error: { code: 'not_found' } },
    });
    // A viewer is still refused before anything is asked.
    expect(await post('vic', `/v1/projects/${PROJECT}/handoffs/h-nowhere/abandon`, { reason: 'x' })).toMatchObject({ status: 403 });
  });

  it("the id-only route: another project's handoff is 404 (and is not counted), a shared id is 409 ambiguous_id for a token that sees both", async () => {
    await create(PROJECT, 'h-shared');
    await create(OTHER, 'h-shared');
    await create(OTHER, 'h-other');
    await projected(PROJECT, 'h-shared');
    await projected(OTHER, 'h-shared');
    await projected(OTHER, 'h-other');

    for (const path of [`/v1/projects/${OTHER}/handoffs/h-shared/abandon`, `/v1/projects/${OTHER}/handoffs/h-other/abandon`, '/v1/handoffs/h-other/abandon']) {
      expect({ path, ...(await post('olga', path, { reason: 'not mine' })) }).toMatchObject({ path, status: 404, body: { error: { code: 'not_found' } } });
    }
    const ambiguous = await post('ada', '/v1/handoffs/h-shared/abandon', { reason: 'which one?' });
    expect(ambiguous).toMatchObject({ status: 409, body: { error: { code: 'ambiguous_id' } } });
    expect([...(ambiguous.body.error!.details!['projects'] as string[])].sort()).toEqual([OTHER, PROJECT].sort());
    const cli = await baton('ada', 'abandon', 'h-shared', '--reason', 'which one?');
    expect(cli.code).toBe(2);
    expect(cli.err).toContain('handoff h-shared exists in projects');

    // For olga the id is unambiguous: the only project of hers that holds it.
    expect(await post('olga', '/v1/handoffs/h-shared/abandon', { reason: 'duplicate of h-1' })).toMatchObject({
      status: 200,
      body: { outcome: 'applied', handoff: { id: 'h-shared', project: PROJECT, status: 'abandoned' } },
    });
    expect(await statusOf(OTHER, 'h-shared')).toBe('pending');
    expect(await statusOf(OTHER, 'h-other')).toBe('pending');
  });

  it('baton abandon: exit 0 saying so, the run whose step it was is held (handoff_abandoned); exit 1 with the refusal code; exit 2 without a reason', async () => {
    expect((await baton('olga', 'start', 'feature', '--run', 'wr-ab-1', '--project', PROJECT)).code).toBe(0);
    const handoffId = await waitFor(
      async () => {
        const routed = (await store.read({ project: PROJECT, kind: 'run', id: 'wr-ab-1' })).events.find((e) => e.type === 'run.routed');
        return routed ? (routed.payload as { handoff_id: string }).handoff_id : undefined;
      },
      'the run to be routed',
      { timeoutMs: 15_000 },
    );
    await projected(PROJECT, handoffId);

    for (const argv of [
      ['abandon', handoffId],
      ['abandon', handoffId, '--reason', '  '],
    ]) {
      const usage = await baton('olga', ...argv);
      expect({ argv, code: usage.code }).toEqual({ argv, code: 2 });
      expect(usage.err).toContain('--reason is required');
    }
    expect(await statusOf(PROJECT, handoffId)).toBe('pending');

    const done = await baton('olga', 'abandon', handoffId, '--reason', 'wrong ticket', '--project', PROJECT);
    expect(done).toEqual({ code: 0, out: `abandoned: ${handoffId} (project ${PROJECT})\n`, err: '' });
    const held = await waitFor(
      async () => (await store.read({ project: PROJECT, kind: 'run', id: 'wr-ab-1' })).events.find((e) => e.type === 'run.held'),
      'the run to be held',
      { timeoutMs: 15_000 },
    );
    expect((held.payload as { reason: string }).reason).toContain(`(handoff_abandoned): abandoned by olga: wrong ticket`);

    const refused = await baton('olga', 'abandon', handoffId, '--reason', 'again', '--json');
    expect(refused.code).toBe(1);
    expect(JSON.parse(refused.err)).toMatchObject({
      error: { code: 'handoff_not_open', details: { status: 'abandoned', http_status: 409, outcome: 'refused' } },
    });
    const prose = await baton('olga', 'abandon', handoffId, '--reason', 'again');
    expect(prose.code).toBe(1);
    expect(prose.err).toContain('the abandon was refused: handoff_not_open');
  });
});
