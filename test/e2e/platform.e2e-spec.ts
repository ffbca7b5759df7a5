import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureTokenKeyFile } from '@baton/platform';
import { batonProjections, createProjectionStore, createRedis, type RedisHandle } from '@baton/projections';
import { createEventRegistry, MsgIds, Subjects } from '@baton/contracts';
import { batonStreamNames, deploymentStreamNames, connectNats, JetStreamEventStore, type NatsHandle } from '@baton/eventstore';
import { waitFor } from '@baton/wait';
// The demo's scenarios (libs/testing/src/demo) are the end-to-end script; `npm run demo` runs the very same code.
import {
  AgentClaims,
  cycleDefinition,
  cycleResult,
  freePort,
  publishAgentResult,
  run,
  runDemo,
  startCycleRun,
  startService,
  stopService,
  waitReady,
  type ServiceProcess,
} from '@baton/testing';

const natsUrl = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

/**
 * The whole platform as processes: the four services are started from their build output with
 * their own stream and key prefix, and driven only through NATS and the operator HTTP API.
 */
describe('Baton end to end: four services as processes', () => {
  const prefix = `e2e${randomBytes(4).toString('hex')}`;
  // The deployment's token key: the notifier trusts only token records signed with it, and the CLI signs with it.
  const keyDir = mkdtempSync(join(tmpdir(), 'baton-e2e-key-'));
  const tokenKey = ensureTokenKeyFile(keyDir).key.file;
  // The ledger re-reads a project's roster after 200 ms (default 5 s), so a test sees a publish soon.
  const env = {
    NATS_URL: natsUrl,
    REDIS_URL: redisUrl,
    BATON_PREFIX: prefix,
    LOG_LEVEL: 'warn',
    WATCHDOG_TICK_MS: '200',
    LEDGER_DEFINITION_TTL_MS: '200',
    BATON_TOKEN_KEY_FILE: tokenKey,
  };
  const services: ServiceProcess[] = [];
  let nats: NatsHandle;
  let redis: RedisHandle;
  let apiUrl: string;
  let apiToken: string;

  beforeAll(async () => {
    nats = await connectNats({ servers: natsUrl, reconnect: false });
    redis = createRedis(redisUrl);
    for (const name of ['ledger', 'router', 'watchdog', 'notifier']) {
      services.push(startService(name, await freePort(), env, { instance: `${name}-e2e` }));
    }
    await Promise.all(services.map((service) => waitReady(service)));
    apiUrl = `http://127.0.0.1:${services.find((s) => s.name === 'notifier')!.port}`;
    // The operator API needs a token: made by the CLI, as an operator would.
    const made = await run(process.execPath, ['bin/baton.js', 'token', 'create', '--role', 'operator', '--project', 'e2e', '--name', 'olga', '--json'], env);
    if (made.code !== 0) throw new Error(`baton token create failed: ${made.stderr}`);
    apiToken = (JSON.parse(made.stdout) as { token: string }).token;
  }, 90_000);

  afterAll(async () => {
    const codes = await Promise.all(services.map((service) => stopService(service)));
    // Everything is closed whatever the codes: an assertion that threw first would leave the
    // connections open, and Jest waiting on them for ever (a CI run hung so).
    for (const stream of deploymentStreamNames(prefix)) await nats.jsm.streams.delete(stream).catch(() => undefined);
    await nats.close();
    const keys = await redis.client.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.client.del(...keys);
    await redis.close();
    rmSync(keyDir, { recursive: true, force: true });
    // Graceful shutdown on SIGTERM exits 0 (a service that never became ready is not stopped gracefully).
    expect(codes).toEqual(services.map(() => 0));
  }, 60_000);

  it('runs the demo scenarios: seed 000 worked examples, a seed 003 stop answered through the API, a seed 002 claim / return / accept cycle', async () => {
    const report = await runDemo({ natsUrl, prefix, apiUrl, apiToken, project: 'e2e', timeoutMs: 30_000 });
    const failed = report.outcomes.filter((o) => !o.ok);
    expect(failed).toEqual([]);
    expect(report.outcomes.length).toBeGreaterThanOrEqual(15);
    // What the inbox holds afterwards: the open budget stop and the no-action hold.
    expect(report.inbox.map((item) => item['kind']).sort()).toEqual(['hold', 'stop']);
  });

  it('bad input at the router is dead-lettered with its reason and original bytes, and the router keeps serving', async () => {
    const subject = `${prefix}.in.e2e.result.support`;
    const bytes = new TextEncoder().encode('{"result_id": "broken", ');
    await nats.js.publish(subject, bytes, { msgID: `bad-${prefix}` });
    const names = batonStreamNames(prefix);
    let found: { reason: string | undefined; data: string } | undefined;
    for (let i = 0; i < 50 && !found; i++) {
      const info = await nats.jsm.streams.info(names.dlq);
      for (let seq = info.state.first_seq; seq <= info.state.last_seq && seq > 0; seq++) {
        const msg = await nats.jsm.streams.getMessage(names.dlq, { seq }).catch(() => null);
        if (msg && new TextDecoder().decode(msg.data) === '{"result_id": "broken", ') {
          found = { reason: msg.header?.get('Baton-Dlq-Reason'), data: new TextDecoder().decode(msg.data) };
        }
      }
      if (!found) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(found).toEqual({ reason: 'malformed_json', data: '{"result_id": "broken", ' });
    const ready = await fetch(`http://127.0.0.1:${services.find((s) => s.name === 'router')!.port}/health/ready`);
    expect(ready.status).toBe(200);
  });

  it("a run stopped from outside (the watchdog's stop) while its agent's handoff is open gets that handoff abandoned by the router: it is not worked, requeued or offered again", async () => {
    const store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    const runId = `wr-stop-${randomBytes(3).toString('hex')}`;
    const encoder = new TextEncoder();
    await nats.js.publish(
      Subjects.runStart(prefix, 'e2e'),
      encoder.encode(JSON.stringify({ workflow_run_id: runId, project: 'e2e', workflow: 'support', started_by: 'dana' })),
      { msgID: MsgIds.start('e2e', runId) },
    );
    const routed = await waitFor(
      async () => (await store.read({ project: 'e2e', kind: 'run', id: runId })).events.find((e) => e.type === 'run.routed'),
      'the run routed',
      {
        timeoutMs: 20_000,
      },
    );
    const handoffId = (routed.payload as { handoff_id: string }).handoff_id;
    await waitFor(
      async () => ((await store.read({ project: 'e2e', kind: 'handoff', id: handoffId })).events.length > 0 ? true : undefined),
      'the handoff created',
      {
        timeoutMs: 20_000,
      },
    );
    const packetId = `wd-guard:e2e-${runId}`;
    await nats.js.publish(
      Subjects.stopRequest(prefix, 'e2e'),
      encoder.encode(
        JSON.stringify({
          packet_id: packetId,
          workflow_run_id: runId,
          project: 'e2e',
          why: 'thrash',
          detail: 'ping-pong on support',
          tried: ['support'],
          requested_by: 'baton-watchdog',
          cause: { kind: 'loop_guard', guard: 'ping_pong', event_id: routed.id },
        }),
      ),
      { msgID: MsgIds.stop('e2e', packetId) },
    );
    const abandoned = await waitFor(
      async () => (await store.read({ project: 'e2e', kind: 'handoff', id: handoffId })).events.find((e) => e.type === 'handoff.abandoned'),
      'the handoff abandoned',
      { timeoutMs: 20_000 },
    );
    expect(abandoned.payload).toMatchObject({ abandoned_by: 'baton-router', reason: expect.stringContaining(`stopped (thrash, packet ${packetId})`) });
    expect((await store.read({ project: 'e2e', kind: 'run', id: runId })).events.map((e) => e.type)).toContain('run.stopped');
  });

  it('baton message says what the run did with the message: queued for a conversation whose agent works (exit 0), refused by a workflow run with its code, the same id with other text, a run that does not exist (exit 1)', async () => {
    const store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    const encoder = new TextEncoder();
    const tag = randomBytes(3).toString('hex');
    const start = async (runId: string, workflow: string, input?: string) => {
      await nats.js.publish(
        Subjects.runStart(prefix, 'e2e'),
        encoder.encode(JSON.stringify({ workflow_run_id: runId, project: 'e2e', workflow, started_by: 'dana', ...(input !== undefined ? { input } : {}) })),
        { msgID: MsgIds.start('e2e', runId) },
      );
      await waitFor(
        async () => (await store.read({ project: 'e2e', kind: 'run', id: runId })).events.find((e) => e.type === 'run.routed' || e.type === 'run.handoff'),
        `run ${runId} under way`,
        {
          timeoutMs: 20_000,
        },
      );
    };
    const message = async (runId: string, ...more: string[]) => {
      const sent = await run(process.execPath, ['bin/baton.js', 'message', runId, '--project', 'e2e', '--json', ...more], { ...env, BATON_CLI_NO_BUILD: '1' });
      return { code: sent.code, out: sent.stdout.trim() === '' ? {} : (JSON.parse(sent.stdout) as Record<string, unknown>), err: sent.stderr };
    };
    // A conversation (seed 001's loan session): its first message handed off to the income agent, which works (no agent runs here).
    const loan = `loan-cli-${tag}`;
    await start(loan, 'loan_session', 'I want a loan offer');
    expect(await message(loan, '--text', 'About 52000 a year', '--id', 'm1')).toMatchObject({
      code: 0,
      out: { outcome: 'queued', position: 1, duplicate: false },
    });
    // Sent again: the same message, already queued.
    expect(await message(loan, '--text', 'About 52000 a year', '--id', 'm1')).toMatchObject({ code: 0, out: { outcome: 'queued', duplicate: true } });
    // The same id with other text: not stored, and said so.
    const reused = await message(loan, '--text', 'Actually 60000', '--id', 'm1');
    expect(reused).toMatchObject({ code: 1, out: { outcome: 'refused', code: 'message_id_reused', duplicate: true } });
    expect(JSON.parse(reused.err)).toMatchObject({
      error: { code: 'message_id_reused', message: expect.stringContaining('with other text: this text was not stored') },
    });
    // A workflow run takes no customer messages: refused with the run's code.
    const support = `wr-msg-${tag}`;
    await start(support, 'support');
    const refused = await message(support, '--text', 'hello?', '--id', 'm1');
    expect(refused).toMatchObject({ code: 1, out: { outcome: 'refused', code: 'run_not_awaiting_input' } });
    // With --json the refusal is one JSON line on stderr, as every CLI failure.
    expect(JSON.parse(refused.err)).toMatchObject({
      error: { code: 'run_not_awaiting_input', message: expect.stringContaining(`run ${support} refused message m1 (run_not_awaiting_input)`), issues: [] },
    });
    // No such run.
    const missing = await message(`nosuch-${tag}`, '--text', 'hi', '--wait-ms', '1500');
    expect(missing).toMatchObject({ code: 1, out: { outcome: 'not_found' } });
    expect(JSON.parse(missing.err)).toMatchObject({ error: { code: 'not_found', message: expect.stringContaining('baton dlq list') } });
  });

  it('a run routed to an agent that left the roster after the run pinned its definition holds for a person (the ledger refused its handoff), and a reroute carries it on', async () => {
    const project = 'e2e-roster';
    const store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    const encoder = new TextEncoder();
    const publish = async (definition: unknown) => {
      const reply = await nats.connection.request(Subjects.routerCommand(prefix, project, 'publish_definition'), encoder.encode(JSON.stringify(definition)), {
        timeout: 10_000,
      });
      return JSON.parse(new TextDecoder().decode(reply.data)) as { ok: boolean };
    };
    const v1 = cycleDefinition(project);
    expect(await publish(v1)).toMatchObject({ ok: true });
    const runId = `wr-roster-${randomBytes(3).toString('hex')}`;
    await startCycleRun(nats, prefix, project, runId, 'dana');
    const runEvents = async () => (await store.read({ project, kind: 'run', id: runId })).events;
    const routed = await waitFor(async () => (await runEvents()).find((e) => e.type === 'run.routed'), 'the run routed to ping', { timeoutMs: 20_000 });
    const claims = new AgentClaims(nats, prefix, project);
    try {
      const handoffId = (routed.payload as { handoff_id: string }).handoff_id;
      const claimId = await claims.claim('ping', handoffId);
      // The project's owners drop `pong` (its step goes to `pang`, a new workflow version); the run keeps v1.
      const v2 = {
        ...v1,
        agents: v1.agents.filter((a) => a.name !== 'pong'),
        workflows: [
          {
            name: 'loop',
            version: 2,
            entry: 'ping',
            steps: [
              { id: 'ping', agent: 'ping', next: 'pang' },
              { id: 'pang', agent: 'pang', next: 'ping' },
            ],
          },
        ],
      };
      expect(await publish(v2)).toMatchObject({ ok: true, changed: true });
      await new Promise((resolve) => setTimeout(resolve, 400)); // past the ledger's roster cache
      await publishAgentResult(nats, prefix, cycleResult(project, runId, 'ping', 1, { handoffId, claimId }));
      const held = await waitFor(async () => (await runEvents()).find((e) => e.type === 'run.held'), 'the run held', { timeoutMs: 20_000 });
      expect(held.payload).toMatchObject({
        pending_target: { agent: 'pong' },
        reason: expect.stringMatching(/^the ledger refused to create handoff .+ to 'pong' \(addressee_not_in_roster\)/),
      });
      expect((await runEvents()).map((e) => e.type)).toContain('run.notice_emitted');
      // A person reroutes the run to an agent of the roster, through the operator API.
      const made = await run(
        process.execPath,
        // olga has a token already (of project e2e, made above): a token's name is unique among active tokens, so this one replaces it.
        ['bin/baton.js', 'token', 'create', '--role', 'operator', '--project', project, '--name', 'olga', '--rotate', '--json'],
        env,
      );
      expect(made.code).toBe(0);
      const token = (JSON.parse(made.stdout) as { token: string }).token;
      const answered = await fetch(`${apiUrl}/v1/projects/${project}/runs/${runId}/answer`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ action: 'reroute', target: 'pang' }),
      });
      expect(answered.status).toBe(200);
      const rerouted = await waitFor(
        async () =>
          (await runEvents()).filter((e) => e.type === 'run.routed').find((e) => (e.payload as { target: { agent: string } }).target.agent === 'pang'),
        'the run rerouted to pang',
        { timeoutMs: 20_000 },
      );
      const pangHandoff = (rerouted.payload as { handoff_id: string }).handoff_id;
      expect(await claims.claim('pang', pangHandoff)).toEqual(expect.any(String));
    } finally {
      await claims.close();
    }
  });

  it('baton replay rebuilds deleted projections into a shadow keyspace and swaps it in: the same state as before', async () => {
    const store = createProjectionStore({ redis: redis.client, prefix: `${prefix}:proj` });
    const names = batonProjections().map((p) => p.name);
    const before = await Promise.all(names.map((name) => store.snapshot(name)));
    expect(before.some((snapshot) => Object.keys(snapshot.keys).length > 0)).toBe(true);
    const keys = await redis.client.keys(`${prefix}:proj:*`);
    expect(keys.length).toBeGreaterThan(0);
    await redis.client.del(...keys);
    const replay = await run(process.execPath, ['bin/baton.js', 'replay'], { ...env, BATON_CLI_NO_BUILD: '1' });
    expect(replay.code).toBe(0);
    const after = await Promise.all(names.map((name) => store.snapshot(name)));
    for (let i = 0; i < names.length; i++) expect(JSON.stringify(after[i]!.keys)).toEqual(JSON.stringify(before[i]!.keys));
    const verify = await run(process.execPath, ['bin/baton.js', 'verify', '--json'], { ...env, BATON_CLI_NO_BUILD: '1' });
    expect(verify.code).toBe(0);
  });
});
