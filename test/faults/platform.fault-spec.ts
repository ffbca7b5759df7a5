import { join } from 'node:path';
import { createEventRegistry, ledgerCommandSubject, MsgIds, Principals, type AggregateKind } from '@baton/contracts';
import { connectNats, DlqAdmin, JetStreamEventStore, type NatsHandle, type StoredEvent } from '@baton/eventstore';
import { batonProjections, createProjectionStore, createRedis, type RedisHandle } from '@baton/projections';
import { ApiTokenStore } from '@baton/platform';
import { AgentClaims, run, waitFor } from '@baton/testing';
import {
  deleteStreams,
  distRoot,
  driveLoad,
  foldAndCheck,
  Platform,
  publishDefinition,
  randomPrefix,
  removeServers,
  sleep,
  startNatsServer,
  startRedisServer,
  summary,
  waitReady,
  type ServerProcess,
} from './harness';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Faults on one platform (our own nats-server and redis-server, the services from dist, two ledger
 * instances): duplicated and redelivered messages, 50 concurrent claimers, a Redis flush, and
 * oversized input at every entry point.
 */
describe('faults on one platform: duplicates, concurrent claimers, a Redis flush, oversized input', () => {
  let nats: ServerProcess;
  let redisServer: ServerProcess;
  let platform: Platform;
  let client: NatsHandle;
  let redis: RedisHandle;
  let store: JetStreamEventStore;
  const prefix = randomPrefix('p');
  const project = 'faults';
  let env: Record<string, string>;

  const readEvents = async (kind: AggregateKind, id: string): Promise<StoredEvent[]> => (await store.read({ project, kind, id })).events;
  const publish = (subject: string, body: unknown, msgID: string) => client.js.publish(subject, encoder.encode(JSON.stringify(body)), { msgID });
  const ledger = async (command: string, body: Record<string, unknown>, actor: string): Promise<{ ok: boolean; error?: { code: string; kind: string } }> => {
    // The subject names the agent (`…agent.<actor>.<command>`); the body never does.
    const subject = ledgerCommandSubject(prefix, project, Principals.agent(project, actor), command);
    const reply = await client.connection.request(subject, encoder.encode(JSON.stringify(body)), { timeout: 10_000 });
    return JSON.parse(decoder.decode(reply.data)) as { ok: boolean; error?: { code: string; kind: string } };
  };

  beforeAll(async () => {
    nats = await startNatsServer();
    redisServer = await startRedisServer();
    env = { NATS_URL: nats.url, REDIS_URL: redisServer.url, BATON_PREFIX: prefix, LOG_LEVEL: 'info', WATCHDOG_TICK_MS: '500' };
    platform = new Platform(env);
    await platform.startOne('ledger', 'ledger');
    await platform.startOne('ledger', 'ledger-2');
    await platform.startOne('router');
    await platform.startOne('watchdog');
    await platform.startOne('notifier');
    await Promise.all([...platform.services.values()].map((s) => waitReady(s, 60_000)));
    client = await connectNats({ servers: nats.url, reconnect: true });
    redis = createRedis(redisServer.url);
    store = new JetStreamEventStore({ js: client.js, jsm: client.jsm, prefix, registry: createEventRegistry() });
    await publishDefinition(client, prefix, project);
  }, 120_000);

  afterAll(async () => {
    await platform?.stop();
    await client?.close();
    await redis?.close();
    await deleteStreams(nats.url, prefix);
    await removeServers([nats, redisServer]);
  }, 60_000);

  it('duplicated messages have no double effects: each result published 5 times with the same msg id and 5 times with new ones is recorded once', async () => {
    const runId = `dup-${prefix}`;
    const start = { workflow_run_id: runId, project, workflow: 'pair', started_by: 'fault-suite' };
    for (let i = 0; i < 5; i++) await publish(`${prefix}.in.${project}.start`, start, i < 3 ? MsgIds.start(project, runId) : `${runId}-again-${i}`);
    const result = (agent: string, n: number) => ({
      result_id: `res-${runId}-${n}`,
      run_id: `ar-${runId}-${n}`,
      project,
      workflow_run_id: runId,
      agent,
      decision: { dispatch: { status: 'advance' } },
      produced_at: new Date().toISOString(),
    });
    const routed = async () =>
      (await readEvents('run', runId)).filter((e) => e.type === 'run.routed').map((e) => (e.payload as { handoff_id: string }).handoff_id);
    const routedCount = async () => (await routed()).length;
    // Each agent claims its handoff first: results are accepted only under the current claim (docs/runs.md).
    const agents = new AgentClaims(client, prefix, project);
    const claimedResult = async (agent: string, n: number) => {
      const handoffId = (await routed())[n - 1] as string;
      return { ...result(agent, n), handoff_id: handoffId, claim_id: await agents.claim(agent, handoffId) };
    };
    await waitFor(async () => ((await routedCount()) >= 1 ? true : undefined), 'the first routing', { timeoutMs: 30_000 });
    const a = await claimedResult('worker-a', 1);
    for (let i = 0; i < 5; i++) await publish(`${prefix}.in.${project}.result.worker-a`, a, MsgIds.result(project, a.workflow_run_id, a.result_id));
    for (let i = 0; i < 5; i++) await publish(`${prefix}.in.${project}.result.worker-a`, a, `${a.result_id}-copy-${i}`);
    await waitFor(async () => ((await routedCount()) >= 2 ? true : undefined), 'the second routing', { timeoutMs: 30_000 });
    const b = await claimedResult('worker-b', 2);
    await agents.close();
    for (let i = 0; i < 5; i++) await publish(`${prefix}.in.${project}.result.worker-b`, b, MsgIds.result(project, b.workflow_run_id, b.result_id));
    for (let i = 0; i < 5; i++) await publish(`${prefix}.in.${project}.result.worker-b`, b, `${b.result_id}-copy-${i}`);
    // A copy of worker-a's result after the run moved on, and one after it completed.
    await publish(`${prefix}.in.${project}.result.worker-a`, a, `${a.result_id}-late`);
    await waitFor(async () => ((await readEvents('run', runId)).some((e) => e.type === 'run.completed') ? true : undefined), 'the run to complete', {
      timeoutMs: 30_000,
    });
    await sleep(1500); // let every copy reach the router
    const load = {
      runs: [runId],
      results: new Map([
        [a.result_id, runId],
        [b.result_id, runId],
      ]),
      unfinished: [],
      publishRetries: 0,
    };
    const anomalies = await waitFor(
      async () => {
        const found = await foldAndCheck(nats.url, prefix, project, load);
        return found.handoffs.length === 0 ? found : undefined;
      },
      'the handoffs to settle',
      { timeoutMs: 20_000 },
    ).catch(() => foldAndCheck(nats.url, prefix, project, load));
    const events = await readEvents('run', runId);
    process.stdout.write(`${summary('duplicates: 5 starts, 11 + 10 copies of two results', load, anomalies, { messages: 26 })}\n`);
    expect(events.filter((e) => e.type === 'run.started')).toHaveLength(1);
    expect(events.filter((e) => e.type === 'run.result_recorded')).toHaveLength(2);
    expect(events.filter((e) => e.type === 'run.completed')).toHaveLength(1);
    expect(anomalies.resultOutcomes).toEqual([]);
    expect(anomalies.handoffs).toEqual([]);
    expect(anomalies.duplicateEventIds).toEqual([]);
  });

  it('50 concurrent claimers of one handoff across two ledger instances: exactly one wins', async () => {
    const handoffId = `claim-${prefix}`;
    const created = await ledger(
      'create',
      {
        handoff_id: handoffId,
        project,
        from_agent: 'lead-agent',
        to_role: 'claimer',
        summary: 'one of you takes this',
        idempotency_key: `create-${handoffId}`,
      },
      'lead-agent',
    );
    expect(created.ok).toBe(true);
    const before = platform.get('ledger').output.join('').length + platform.get('ledger-2').output.join('').length;
    expect(before).toBeGreaterThan(0);
    const replies = await Promise.all(
      Array.from({ length: 50 }, (_, i) => ledger('claim', { handoff_id: handoffId, idempotency_key: `claim-${handoffId}-${i}` }, `claimer-${i}`)),
    );
    const winners = replies.filter((r) => r.ok);
    const events = await readEvents('handoff', handoffId);
    const served = (key: string) =>
      platform
        .get(key)
        .output.join('')
        .split('\n')
        .filter((line) => line.includes(handoffId) && line.includes('"command":"claim"')).length;
    process.stdout.write(
      `[fault] 50 concurrent claimers: ${JSON.stringify({ winners: winners.length, refusals: [...new Set(replies.filter((r) => !r.ok).map((r) => r.error?.code))], ledger1: served('ledger'), ledger2: served('ledger-2') })}\n`,
    );
    expect(winners).toHaveLength(1);
    expect(events.filter((e) => e.type === 'handoff.claimed')).toHaveLength(1);
    expect(replies.filter((r) => !r.ok).every((r) => r.error !== undefined && r.error.kind !== 'internal')).toBe(true);
    // Both ledger processes took part (core NATS queue group).
    expect(served('ledger')).toBeGreaterThan(0);
    expect(served('ledger-2')).toBeGreaterThan(0);
  });

  it('flush Redis: the notifier notices and rebuilds identical projections by itself; `baton replay` does the same after a second flush; new events keep being applied', async () => {
    const load = await driveLoad({ natsUrl: nats.url, prefix, project, runs: 30, concurrency: 5 });
    expect(load.unfinished).toEqual([]);
    const projections = createProjectionStore({ redis: redis.client, prefix: `${prefix}:proj` });
    const names = batonProjections().map((p) => p.name);
    const snapshot = async () => JSON.stringify(await Promise.all(names.map(async (name) => (await projections.snapshot(name)).keys)));
    /** The keys that differ between two snapshots (projection/key), for a readable failure. */
    const differences = (a: string, b: string): string[] => {
      const left = JSON.parse(a) as Record<string, unknown>[];
      const right = JSON.parse(b) as Record<string, unknown>[];
      const out: string[] = [];
      names.forEach((name, i) => {
        const l = left[i] ?? {};
        const r = right[i] ?? {};
        for (const key of new Set([...Object.keys(l), ...Object.keys(r)])) {
          if (JSON.stringify(l[key]) !== JSON.stringify(r[key]))
            out.push(`${name}/${key}: ${JSON.stringify(l[key] ?? null).slice(0, 160)} ≠ ${JSON.stringify(r[key] ?? null).slice(0, 160)}`);
        }
      });
      return out;
    };
    // Quiesce: the projections stop changing.
    let before = await snapshot();
    for (let stable = 0; stable < 3; ) {
      await sleep(700);
      const now = await snapshot();
      stable = now === before ? stable + 1 : 0;
      before = now;
    }
    expect(before.length).toBeGreaterThan(100);
    await redis.client.flushall();
    // The notifier notices by itself (NOTIFIER_PROJECTION_CHECK_MS, default 5 s) and rebuilds
    // every projection from the stream.
    const flushedAt = Date.now();
    let healedMs: number | null = null;
    for (let i = 0; i < 80 && healedMs === null; i++) {
      await sleep(250);
      if ((await snapshot()) === before) healedMs = Date.now() - flushedAt;
    }
    const healed = await snapshot();
    const healDifferences = differences(before, healed);
    // Then a second flush, with `baton replay` racing the notifier's own check: whichever swaps
    // first wins, the other drops its shadow; the result is the same projection.
    await redis.client.flushall();
    const replay = await run(process.execPath, [join(distRoot, 'bin', 'baton.js'), 'replay'], { ...env, BATON_CLI_NO_BUILD: '1' });
    expect(replay.stderr.includes('Error') ? replay.stderr : '').toBe('');
    let after = await snapshot();
    for (let i = 0; i < 40 && after !== before; i++) {
      await sleep(250);
      after = await snapshot();
    }
    const replayDifferences = differences(before, after);
    process.stdout.write(
      `[fault] redis flush: ${JSON.stringify({ runs: load.runs.length, projections: names, snapshotBytes: before.length, notifierRebuiltItselfMs: healedMs, differencesAfterSelfHeal: healDifferences.length, replayExit: replay.code, differencesAfterReplay: replayDifferences.length })}\n`,
    );
    // The rebuilt projections are identical to the ones before the flush (the replay source once
    // stopped at the first empty pull and rebuilt from a truncated history; see docs/reliability.md).
    expect(healDifferences).toEqual([]);
    expect(healedMs).not.toBeNull();
    expect(replay.code).toBe(0);
    expect(replayDifferences).toEqual([]);
    const verify = await run(process.execPath, [join(distRoot, 'bin', 'baton.js'), 'verify'], { ...env, BATON_CLI_NO_BUILD: '1' });
    expect(verify.code).toBe(0);
    // The notifier keeps applying new events on the rebuilt projection.
    const more = await driveLoad({ natsUrl: nats.url, prefix, project, runs: 3, concurrency: 3 });
    expect(more.unfinished).toEqual([]);
    await waitFor(async () => ((await snapshot()) !== after ? true : undefined), 'new events in the rebuilt projections', { timeoutMs: 15_000 });
  });

  it('payload size caps at every entry point: oversized input is refused at the router (dead letter payload_too_large), the ledger and the notifier HTTP API', async () => {
    const big = 'x'.repeat(300 * 1024);
    // Router: an agent result over Limits.maxMessageBytes.
    const runId = `big-${prefix}`;
    await publish(
      `${prefix}.in.${project}.result.worker-a`,
      { result_id: `r-${runId}`, run_id: 'ar', project, workflow_run_id: runId, agent: 'worker-a', body: big, produced_at: new Date().toISOString() },
      `big-${runId}`,
    );
    const dlq = new DlqAdmin({ js: client.js, jsm: client.jsm, prefix });
    const letter = await waitFor(
      async () => (await dlq.list({ reason: 'payload_too_large' })).find((l) => l.subject.endsWith('.result.worker-a')),
      'the oversized result in the dead letters',
      { timeoutMs: 30_000 },
    );
    expect(letter.data.length).toBe(4096); // never redriven: its letter keeps the first 4 KiB (REFUSED_LETTER_BYTES)
    // Ledger: a command over the cap.
    const refused = await ledger(
      'create',
      { handoff_id: `big-${prefix}`, project, from_agent: 'lead-agent', to_role: 'claimer', summary: 'x', context: { big }, idempotency_key: `big-${prefix}` },
      'lead-agent',
    );
    expect(refused).toMatchObject({ ok: false, error: { code: 'payload_too_large' } });
    // Notifier: an HTTP body over the cap — 401 to a caller without a token (told nothing of its
    // body), 413 to an operator.
    const notifier = platform.get('notifier');
    const anonymous = await fetch(`http://127.0.0.1:${notifier.port}/v1/runs/${runId}/answer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ note: big }),
    });
    expect(anonymous.status).toBe(401);
    const { token } = await new ApiTokenStore(redis.client, prefix).create({
      name: 'olga',
      role: 'operator',
      projects: [project],
      now: new Date().toISOString(),
    });
    const response = await fetch(`http://127.0.0.1:${notifier.port}/v1/runs/${runId}/answer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ note: big }),
    });
    expect(response.status).toBe(413);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('payload_too_large');
    // Every service still serves.
    for (const service of platform.services.values()) expect((await fetch(`http://127.0.0.1:${service.port}/health/ready`)).status).toBe(200);
  });
});
