import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createEventRegistry, type EventEnvelope } from '@baton/contracts';
import type { HandoffCommand } from '@baton/domain';
import { JetStreamEventStore, batonStreamNames, batonTopology, connectNats, provision, type NatsHandle } from '@baton/eventstore';
import {
  createBatonProjector,
  createProjectionStore,
  createRedis,
  foldScenario,
  jetStreamReplaySource,
  scenarioEnvelope,
  scenarioSteps,
  type ProjectionStore,
  type RedisHandle,
  type ScenarioStep,
} from '@baton/projections';
import { main } from './main';
import { bufferedIo } from './output';

/**
 * Issue 11 / 14: `baton run`, `baton handoff`, `baton answer` and `baton decide` address a record
 * by project and id. The same workflow_run_id and handoff id exist in projects alpha and beta.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const at = (minute: number) => new Date(Date.UTC(2026, 0, 3, 9, minute)).toISOString();

/** Beta: its own run wr-a (started by pat) and handoff h-1 (claimed by carol), as the deciders write them. */
function betaSteps(): ScenarioStep[] {
  const project = 'beta';
  const [startA] = scenarioSteps({ project }) as [ScenarioStep];
  if (startA.command.type !== 'start_run') throw new Error('unexpected scenario');
  const ho = (actor: string, command: Omit<HandoffCommand, 'metadata'>, minute: number): ScenarioStep => ({
    aggregate: 'handoff',
    id: 'h-1',
    actor,
    origin: 'agent',
    command: { ...command, metadata: { now: at(minute), actor, actorKind: 'agent' } } as HandoffCommand,
  });
  return [
    {
      ...startA,
      command: { ...startA.command, data: { ...startA.command.data, people: { started_by: 'pat', issue_author: null, trigger_author: null } } },
    } as ScenarioStep,
    ho(
      'dave',
      {
        type: 'create',
        data: {
          handoff_id: 'h-1',
          project,
          kind: 'task',
          priority: 'low',
          from_agent: 'dave',
          to_agent: 'carol',
          summary: 'beta h-1',
          context: {},
          acceptance: {},
          max_retries: 3,
          workflow_run_id: 'wr-a',
          idempotency_key: 'create:beta:h-1',
        },
      },
      1,
    ),
    ho(
      'carol',
      { type: 'claim', data: { handoff_id: 'h-1', claim_id: 'c-carol', lease_ms: 600_000, claimer_roles: [], idempotency_key: 'claim:beta:h-1' } },
      2,
    ),
  ];
}

describe('the baton command addresses runs and handoffs by project and id (real NATS and Redis)', () => {
  let nats: NatsHandle;
  let redis: RedisHandle;
  let prefix: string;
  let store: ProjectionStore;
  let server: Server;
  let apiUrl: string;
  const registry = createEventRegistry();
  const requests: { method: string; url: string; body: unknown }[] = [];

  async function baton(...argv: string[]) {
    return batonWith({}, ...argv);
  }

  async function batonWith(env: Record<string, string>, ...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, {
      io,
      env: { NATS_URL, REDIS_URL, BATON_PREFIX: prefix, BATON_API_URL: apiUrl, BATON_OPERATOR: 'olga', BATON_TOKEN: 'bt_test', ...env },
    });
    return { code, out: io.out(), err: io.err() };
  }

  /** Append both projects' histories to the events stream (each aggregate in order), then project them as the notifier does. */
  async function seed(): Promise<void> {
    const events = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry });
    const last = new Map<string, number>();
    for (const [project, history] of [
      ['alpha', foldScenario(scenarioSteps({ project: 'alpha' }))],
      ['beta', foldScenario(betaSteps())],
    ] as const) {
      for (const [index, e] of history.entries()) {
        const ref = { project, kind: e.aggregate, id: e.id } as const;
        const key = `${project}/${e.aggregate}/${e.id}`;
        const envelope: EventEnvelope = scenarioEnvelope(registry, e, `${project}-ev-${index}`, project);
        const result = await events.append(ref, [envelope], { expectedVersion: last.get(key) ?? 0 });
        last.set(key, result.lastSeq);
      }
    }
    const projector = createBatonProjector({ store });
    for await (const event of jetStreamReplaySource({ nats, prefix, registry })(1)) await projector.apply(event);
  }

  beforeAll(async () => {
    server = createServer((req: IncomingMessage, res) => {
      let body = '';
      req.on('data', (chunk) => (body += chunk));
      req.on('end', () => {
        const url = req.url ?? '';
        requests.push({ method: req.method ?? '', url, body: body ? JSON.parse(body) : null });
        // The id-only routes: the shared ids are ambiguous, as the notifier answers them.
        if (!url.startsWith('/v1/projects/')) {
          res.writeHead(409, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { code: 'ambiguous_id', message: 'several projects', issues: [], details: { projects: ['alpha', 'beta'] } } }));
          return;
        }
        const project = url.split('/')[3];
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify(
            url.endsWith('/decision')
              ? { outcome: 'applied', handoff: { id: 'hb-1', project }, events: 1 }
              : {
                  accepted: true,
                  outcome: 'applied',
                  answer_id: 'a',
                  project,
                  workflow_run_id: 'wr-a',
                  subject: 's',
                  duplicate: false,
                  status_url: `/v1/projects/${project}/runs/wr-a/answers/a`,
                  run: { status: 'running' },
                },
          ),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    prefix = `t${randomBytes(5).toString('hex')}`;
    nats = await connectNats({ servers: NATS_URL, name: 'cli-projects-int', reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
    redis = createRedis(REDIS_URL);
    await redis.ping();
    store = createProjectionStore({ redis: redis.client, prefix: `${prefix}:proj` });
    await seed();
  });

  afterAll(async () => {
    for await (const batch of redis.client.scanStream({ match: `${prefix}:*`, count: 500 })) {
      const keys = batch as string[];
      if (keys.length > 0) await redis.client.unlink(...keys);
    }
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
    await redis.close();
    await nats.drain();
    await new Promise((resolve) => server.close(resolve));
  });

  beforeEach(() => {
    requests.length = 0;
  });

  it('handoff <id> of an id two projects hold is a usage error naming them; --project reads each its own record, claim and timeline', async () => {
    const ambiguous = await baton('handoff', 'h-1');
    expect(ambiguous.code).toBe(2);
    expect(ambiguous.err).toContain('handoff h-1 exists in projects alpha, beta');
    expect(ambiguous.err).toContain('--project');
    // With --json: the code answer and decide give for the same situation, with the projects.
    const typed = await baton('handoff', 'h-1', '--json');
    expect(typed.code).toBe(2);
    expect(JSON.parse(typed.err)).toEqual({
      error: {
        code: 'ambiguous_id',
        message: expect.stringContaining('handoff h-1 exists in projects alpha, beta'),
        issues: [],
        details: { projects: ['alpha', 'beta'] },
      },
    });

    const alpha = JSON.parse((await baton('handoff', 'h-1', '--project', 'alpha', '--json')).out);
    const beta = JSON.parse((await baton('handoff', 'h-1', '--project', 'beta', '--json')).out);
    expect(alpha).toMatchObject({ project: 'alpha', view_source: 'projection', handoff: { id: 'h-1', project: 'alpha', status: 'returned', to_agent: 'bob' } });
    expect(beta).toMatchObject({
      project: 'beta',
      view_source: 'projection',
      handoff: { id: 'h-1', project: 'beta', status: 'claimed', claimed_by: 'carol', claim_id: 'c-carol' },
    });
    expect(beta.timeline.map((t: { type: string }) => t.type)).toEqual(['handoff.created', 'handoff.claimed']);
    expect(alpha.timeline.map((t: { type: string }) => t.type)).toEqual(['handoff.created', 'handoff.claimed', 'handoff.returned']);
    // An id one project holds needs no --project.
    expect(JSON.parse((await baton('handoff', 'h-2', '--json')).out)).toMatchObject({ project: 'alpha', handoff: { id: 'h-2', project: 'alpha' } });
    expect((await baton('handoff', 'h-1', '--project', 'gamma')).code).toBe(1);
    expect((await baton('handoff', 'h-1', '--project', 'Not:A:Project')).code).toBe(2);
  });

  it('run <id> likewise: ambiguous without --project; each project has its own view, timeline and handoffs; --at folds one project', async () => {
    const ambiguous = await baton('run', 'wr-a');
    expect(ambiguous.code).toBe(2);
    expect(ambiguous.err).toContain('run wr-a exists in projects alpha, beta');
    const typed = await baton('run', 'wr-a', '--json');
    expect(typed.code).toBe(2);
    expect(JSON.parse(typed.err)).toMatchObject({ error: { code: 'ambiguous_id', details: { projects: ['alpha', 'beta'] } } });
    const alpha = JSON.parse((await baton('run', 'wr-a', '--project', 'alpha', '--json')).out);
    const beta = JSON.parse((await baton('run', 'wr-a', '--project', 'beta', '--json')).out);
    expect(alpha).toMatchObject({ project: 'alpha', run: { project: 'alpha', status: 'stopped', people: { started_by: 'sam' } } });
    expect(beta).toMatchObject({ project: 'beta', run: { project: 'beta', status: 'running', people: { started_by: 'pat' } } });
    expect(beta.handoffs).toEqual([{ project: 'beta', id: 'h-1' }]);
    expect(alpha.handoffs).toEqual(
      expect.arrayContaining([
        { project: 'alpha', id: 'h-1' },
        { project: 'alpha', id: 'h-2' },
      ]),
    );
    const betaSeqs = beta.timeline.map((t: { seq: number }) => t.seq);
    expect(alpha.timeline.filter((t: { seq: number }) => betaSeqs.includes(t.seq))).toEqual([]);
    const asOf = JSON.parse((await baton('run', 'wr-a', '--project', 'beta', '--at', String(betaSeqs[0]), '--json')).out);
    expect(asOf).toMatchObject({ project: 'beta', view_source: 'events', at_seq: betaSeqs[0], run: { project: 'beta' } });
    expect((await baton('run', 'wr-a', '--at', String(betaSeqs[0]))).code).toBe(2);
    expect(JSON.parse((await baton('run', 'wr-b', '--json')).out)).toMatchObject({ project: 'alpha', run: { workflow_run_id: 'wr-b' } });
  });

  it('answer and decide: an ambiguous id is a usage error naming the projects; --project uses the project route and --json names the project', async () => {
    const ambiguous = await baton('answer', 'stop-r-wr-a:res-a1', '--action', 'deny');
    expect(ambiguous.code).toBe(2);
    expect(ambiguous.err).toContain('stop packet stop-r-wr-a:res-a1 exists in projects alpha, beta');
    const typed = await baton('answer', 'stop-r-wr-a:res-a1', '--action', 'deny', '--json');
    expect(typed.code).toBe(2);
    expect(JSON.parse(typed.err)).toMatchObject({ error: { code: 'ambiguous_id', details: { projects: ['alpha', 'beta'] } } });
    const answered = await baton('answer', 'stop-r-wr-a:res-a1', '--action', 'deny', '--project', 'beta', '--json');
    expect(answered.code).toBe(0);
    expect(JSON.parse(answered.out)).toMatchObject({ project: 'beta', accepted: true });
    expect(requests.map((r) => `${r.method} ${r.url}`)).toEqual([
      'POST /v1/stops/stop-r-wr-a%3Ares-a1/answer',
      'POST /v1/stops/stop-r-wr-a%3Ares-a1/answer',
      'POST /v1/projects/beta/stops/stop-r-wr-a%3Ares-a1/answer',
    ]);

    requests.length = 0;
    const approve = await baton('answer', 'stop-r-wr-a:res-a1', '--action', 'approve', '--project', 'alpha', '--digest', 'sha256:abc');
    expect(approve.code).toBe(0);
    expect(approve.out).toContain('applied stop-r-wr-a:res-a1 (project alpha): approve; run wr-a is now running');
    expect(requests.map((r) => `${r.method} ${r.url}`)).toEqual(['POST /v1/projects/alpha/stops/stop-r-wr-a%3Ares-a1/answer']);
    expect(requests[0]!.body).toMatchObject({ action: 'approve', pending_digest: 'sha256:abc' });

    const undecided = await baton('decide', 'hb-h-1', 'accept');
    expect(undecided.code).toBe(2);
    expect(undecided.err).toContain('handoff hb-h-1 exists in projects alpha, beta');
    const decided = await baton('decide', 'hb-h-1', 'accept', '--project', 'alpha', '--json');
    expect(decided.code).toBe(0);
    expect(JSON.parse(decided.out)).toMatchObject({ project: 'alpha', handoff: { project: 'alpha' } });
    expect(requests[requests.length - 1]!.url).toBe('/v1/projects/alpha/handoffs/hb-h-1/decision');
    expect((await baton('decide', 'hb-h-1', 'accept', '--project', 'Bad Project')).code).toBe(2);
  });

  it('with Redis unreachable run and handoff fold the view from the events stream, with a warning (as with NATS down they show the projection); with --json stderr holds JSON only: on success the one {"warnings":[…]} line, on failure details.warnings in the one failure line, each warning typed by its code', async () => {
    // Nothing listens on port 1 of the loopback: Redis cannot be reached.
    const redisDown = { REDIS_URL: 'redis://127.0.0.1:1' };
    const run = await batonWith(redisDown, 'run', 'wr-a', '--project', 'beta', '--json');
    expect(run.code).toBe(0);
    expect(JSON.parse(run.out)).toMatchObject({
      project: 'beta',
      view_source: 'events',
      timeline_source: 'stream',
      run: { project: 'beta', status: 'running', people: { started_by: 'pat' } },
    });
    // stdout is the documented report, unchanged; stderr one JSON line: the warning, by its code.
    const projectionsUnavailable = {
      code: 'projections_unavailable',
      message: expect.stringContaining('cannot read the projections (cannot reach Redis at redis://127.0.0.1:1'),
    };
    expect(run.err).toMatch(/^[^\n]+\n$/);
    expect(JSON.parse(run.err)).toEqual({ warnings: [projectionsUnavailable] });
    const prosed = await batonWith(redisDown, 'run', 'wr-a', '--project', 'beta');
    expect(prosed.code).toBe(0);
    expect(prosed.err).toContain('baton: warning: cannot read the projections (cannot reach Redis at redis://127.0.0.1:1');
    expect(prosed.err).toContain('folding the view from the events stream');

    const handoff = await batonWith(redisDown, 'handoff', 'h-1', '--project', 'beta', '--json');
    expect(handoff.code).toBe(0);
    expect(JSON.parse(handoff.out)).toMatchObject({ project: 'beta', view_source: 'events', handoff: { id: 'h-1', claimed_by: 'carol' } });
    expect(JSON.parse(handoff.err)).toEqual({ warnings: [projectionsUnavailable] });
    // Nothing to warn of: nothing on stderr.
    expect((await baton('run', 'wr-a', '--project', 'beta', '--json')).err).toBe('');

    // A failure with --json: one JSON line on stderr, the warning in its details (no warnings line besides).
    for (const kind of ['run', 'handoff']) {
      const missing = await batonWith(redisDown, kind, 'r-nope', '--project', 'beta', '--json');
      expect({ kind, code: missing.code, out: missing.out, lines: missing.err.trim().split('\n').length }).toEqual({ kind, code: 1, out: '', lines: 1 });
      expect(JSON.parse(missing.err)).toMatchObject({ error: { code: 'not_found', details: { warnings: [projectionsUnavailable] } } });
    }

    // Without --project the stream alone finds the project, or names the projects sharing the id.
    const prose = await batonWith(redisDown, 'handoff', 'h-2');
    expect(prose.code).toBe(0);
    expect(prose.out).toMatch(/project: +alpha/);
    expect(prose.out).toContain('folded from the events (projection missing or Redis unreachable)');
    expect((await batonWith(redisDown, 'run', 'wr-a')).code).toBe(2);

    // Both down: nothing to read the run from.
    const neither = await batonWith({ ...redisDown, NATS_URL: 'nats://127.0.0.1:1' }, 'run', 'wr-a', '--project', 'beta', '--json');
    expect(neither.code).toBe(69);
    expect(neither.out).toBe('');
    expect(JSON.parse(neither.err)).toMatchObject({
      error: {
        code: 'unavailable',
        details: { warnings: [{ code: 'projections_unavailable', message: expect.stringContaining('cannot read the projections') }] },
      },
    });
  });

  it('with the projections gone the events stream still tells the projects apart (run last: it deletes the projection keys)', async () => {
    const keys: string[] = [];
    for await (const batch of redis.client.scanStream({ match: `${prefix}:proj:*`, count: 500 })) keys.push(...(batch as string[]));
    await redis.client.unlink(...keys);
    const ambiguous = await baton('handoff', 'h-1');
    expect(ambiguous.code).toBe(2);
    expect(ambiguous.err).toContain('alpha, beta');
    expect(JSON.parse((await baton('handoff', 'h-1', '--project', 'beta', '--json')).out)).toMatchObject({
      project: 'beta',
      view_source: 'events',
      handoff: { project: 'beta', claimed_by: 'carol' },
    });
  });
});
