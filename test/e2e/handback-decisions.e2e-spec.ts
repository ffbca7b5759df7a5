import { randomBytes } from 'node:crypto';
import { Principals } from '@baton/contracts';
import { connectNats, LedgerClient, type NatsHandle } from '@baton/eventstore';
import { createRedis, type RedisHandle } from '@baton/projections';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the services run in this process (no build needed)
import { startLedger } from '../../apps/ledger/src/ledger';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the services run in this process (no build needed)
import { startNotifier } from '../../apps/notifier/src/main';
// eslint-disable-next-line @nx/enforce-module-boundaries -- tokens are made as `baton token create` would
import { TokenStore } from '../../apps/notifier/src/auth/token-store';
import { stopInProcess } from './support';

/*
 * A handback decision through the operator API is idempotent on its `idempotency_key`, and the key
 * is a promise about the decision: the ledger takes the same key from the same operator as a retry
 * and stores nothing, so the API compares the decision recorded under the key with the one sent —
 * the same decision again is 200 applied, the other decision (the web form's Rework, then Back and
 * Accept) is 409 `idempotency_key_reused`, never a 200 for a decision that was not made. Ledger and
 * notifier run in this process against real NATS and Redis.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const PROJECT = 'hbdemo';

interface Reply {
  status: number;
  body: Record<string, unknown> & { error?: { code: string; details?: Record<string, unknown> } };
}

describe('handback decisions through the operator API (ledger + notifier in process, real NATS and Redis)', () => {
  const prefix = `hb${randomBytes(5).toString('hex')}`;
  const services: RunningService[] = [];
  let nats: NatsHandle;
  let redis: RedisHandle;
  let base: string;
  let olga: string;
  const env = { ...process.env, NATS_URL, REDIS_URL, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: 'error', BATON_NATS_AUTH: 'none' };

  const post = async (path: string, body: unknown): Promise<Reply> => {
    const response = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${olga}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Reply['body'] };
  };

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    redis = createRedis(REDIS_URL);
    services.push(await startLedger(env));
    const notifier = await startNotifier(env);
    services.push(notifier);
    base = (await notifier.app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
    olga = (await new TokenStore(redis.client, prefix).create({ name: 'olga', role: 'operator', projects: [PROJECT], now: new Date().toISOString() })).token;
  }, 60_000);

  afterAll(() => stopInProcess(services, nats, redis, prefix), 30_000);

  it('the same key with the other decision is 409 idempotency_key_reused; the same decision again is applied once', async () => {
    const alice = new LedgerClient(nats, prefix, { as: Principals.agent(PROJECT, 'alice'), attempts: 3 });
    const bob = new LedgerClient(nats, prefix, { as: Principals.agent(PROJECT, 'bob'), attempts: 3 });
    const created = await alice.create(PROJECT, {
      handoff_id: 'h-1',
      from_agent: 'alice',
      to_agent: 'bob',
      summary: 'write the parser',
      idempotency_key: 'create-h-1',
    });
    expect(created.ok).toBe(true);
    const claimed = await bob.claim(PROJECT, { handoff_id: 'h-1', idempotency_key: 'claim-h-1' });
    if (!claimed.ok) throw new Error(claimed.error.code);
    const report = {
      summary: 'parser written',
      files_changed: ['parser.ts'],
      verification: 'tests',
      next_steps: '',
      outcome: 'completed' as const,
      evidence: { tests_run: ['parser.spec.ts'] },
    };
    const returned = await bob.return(PROJECT, { handoff_id: 'h-1', claim_id: claimed.handoff.claim_id!, report, idempotency_key: 'return-h-1' });
    if (!returned.ok) throw new Error(returned.error.code);
    const handback = returned.handoff.handback_id!;
    await waitFor(
      async () =>
        (await fetch(`${base}/v1/projects/${PROJECT}/handoffs/${handback}`, { headers: { authorization: `Bearer ${olga}` } })).status === 200
          ? true
          : undefined,
      `${handback} projected`,
      { timeoutMs: 15_000 },
    );

    const path = `/v1/projects/${PROJECT}/handoffs/${handback}/decision`;
    const rework = await post(path, { decision: 'rework', note: 'add the error paths', idempotency_key: 'web-k1' });
    expect(rework).toMatchObject({ status: 200, body: { outcome: 'applied' } });
    // The form's other button, same key: not a decision anyone made.
    const accept = await post(path, { decision: 'accept', idempotency_key: 'web-k1' });
    expect(accept).toMatchObject({
      status: 409,
      body: {
        error: { code: 'idempotency_key_reused', details: { idempotency_key: 'web-k1', command: 'decide_handback', outcome: 'refused', decided: 'rework' } },
      },
    });
    // The same decision again is the retry the key is for.
    expect(await post(path, { decision: 'rework', note: 'add the error paths', idempotency_key: 'web-k1' })).toMatchObject({
      status: 200,
      body: { outcome: 'applied' },
    });
    expect(await alice.get(PROJECT, 'h-1')).toMatchObject({ status: 'pending', retry: { retry_count: 1 } });
  });
});
