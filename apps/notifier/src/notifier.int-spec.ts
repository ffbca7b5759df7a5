import { randomBytes } from 'node:crypto';
import {
  createEventRegistry,
  handoffToolName,
  ledgerCommandSubject,
  MeshDefinitionSchema,
  Principals,
  Subjects,
  type HandoffEvent,
  type MeshEvent,
  type StopPacket,
} from '@baton/contracts';
import { handoffDecider, meshDecider, meshEntryHandoffId, meshHandoffId, meshStopId, reactToHandoffEvent, runDecider, type MeshCommand } from '@baton/domain';
import { batonStreamNames, batonTopology, connectNats, JetStreamEventStore, provision, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { createProjectionStore, createRedis, diffSnapshots, scenarioSteps, type RedisHandle, type ScenarioStep } from '@baton/projections';
import { startNotifier } from './main';
import { projectionPrefix } from './projection/tokens';
import { TokenStore } from './auth/token-store';
import { HealthLiveSchema, HealthReadySchema } from './api/schemas';

const PROJECTIONS = ['inbox', 'stops', 'handoffs', 'runs', 'notices'];
const prefix = `tn${randomBytes(5).toString('hex')}`;
const natsUrl = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const streams = batonStreamNames(prefix);
const decoder = new TextDecoder();

let nats: NatsHandle;
let redis: RedisHandle;
let events: JetStreamEventStore;
let service: RunningService;
let base: string;
/** An operator token of project demo named olga: the operator API needs a bearer token and takes the answering name from it. */
let token: string;
const noticesSeen: string[] = [];
let commandCount = 0;

/** Append a scenario step through the event store with the real deciders (and the ledger's reactions). */
async function append(steps: ScenarioStep[]): Promise<number> {
  let noticeEvents = 0;
  const queue = [...steps];
  while (queue.length > 0) {
    const step = queue.shift() as ScenarioStep;
    const meta = {
      commandId: `cmd-${++commandCount}`,
      occurredAt: step.command.metadata.now,
      actor: step.actor,
      origin: step.origin,
      causationId: null,
      correlationId: step.id,
    };
    const ref = { project: 'demo', kind: step.aggregate, id: step.id } as const;
    if (step.aggregate === 'run') {
      const result = await events.handleCommand(ref, runDecider, step.command, meta);
      if (!result.ok) throw new Error(`${step.command.type} refused: ${result.error.code}`);
      noticeEvents += result.events.filter((e) => e.type === 'run.notice_emitted').length;
      continue;
    }
    const result = await events.handleCommand(ref, handoffDecider, step.command, meta);
    if (!result.ok) throw new Error(`${step.command.type} refused: ${result.error.code}`);
    let state = handoffDecider.initialState();
    for (const e of (await events.read(ref)).events) state = handoffDecider.evolve(state, { type: e.type, data: e.payload } as HandoffEvent);
    const reactions: ScenarioStep[] = [];
    for (const stored of result.events) {
      const event = { type: stored.type, data: stored.payload } as HandoffEvent;
      for (const reaction of reactToHandoffEvent(event, { state, deriveId: (...parts) => parts.join('-'), projectLead: 'lena' })) {
        reactions.push({ aggregate: 'handoff', id: reaction.aggregateId, command: reaction.command, actor: reaction.command.metadata.actor, origin: 'agent' });
      }
    }
    queue.unshift(...reactions);
  }
  return noticeEvents;
}

async function caughtUp(timeoutMs = 10_000): Promise<void> {
  const store = createProjectionStore({ redis: redis.client, prefix: projectionPrefix(prefix) });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const last = (await nats.jsm.streams.info(streams.events)).state.last_seq;
    const seqs = await Promise.all(PROJECTIONS.map(async (name) => (await store.status({ name, version: 1 })).lastSeq));
    if (seqs.every((s) => s === last)) return;
    if (Date.now() > deadline) throw new Error(`projections at ${seqs.join(',')}, stream at ${last}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const get = async (path: string) => {
  const response = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } });
  return {
    status: response.status,
    body: (await response.json()) as Record<string, unknown> & {
      items?: Array<Record<string, unknown>>;
      next_cursor?: string | null;
      error?: { code: string };
    },
  };
};
const post = async (path: string, body: unknown) => {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> & { error?: { code: string } } };
};

describe('notifier (real NATS, Redis and HTTP)', () => {
  let noticesAfterStart = 0;

  beforeAll(async () => {
    nats = await connectNats({ servers: natsUrl, reconnect: false });
    redis = createRedis();
    await provision(nats.jsm, { streams: batonTopology(prefix).streams });
    events = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    nats.connection.subscribe(Subjects.notice(prefix, 'demo'), {
      callback: (_err, msg) => noticesSeen.push((JSON.parse(decoder.decode(msg.data)) as { notice_id: string }).notice_id),
    });
    const steps = scenarioSteps();
    const split = steps.findIndex((s) => s.aggregate === 'run' && s.id === 'wr-d');
    // History written before the notifier exists: it rebuilds its projections from the stream at start.
    await append(steps.slice(0, split));
    // No router runs here: an answer is never decided, so it waits only briefly before its 202.
    service = await startNotifier({
      ...process.env,
      BATON_PREFIX: prefix,
      HTTP_PORT: '0',
      LOG_LEVEL: 'error',
      BATON_MAX_DELIVER: '3',
      NOTIFIER_PROJECTION_CHECK_MS: '200',
      NOTIFIER_ANSWER_WAIT_MS: '200',
    });
    base = (await service.app.getUrl()).replace('[::1]', '127.0.0.1');
    token = (await new TokenStore(redis.client, prefix).create({ name: 'olga', role: 'operator', projects: ['demo'], now: new Date().toISOString() })).token;
    // Live events: applied by the durable consumer.
    noticesAfterStart = await append(steps.slice(split));
    await caughtUp();
    await nats.connection.flush();
  });

  afterAll(async () => {
    await service?.stop();
    for (const name of [streams.events, streams.inbox, streams.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
    for await (const batch of redis.client.scanStream({ match: `${prefix}:*`, count: 500 })) {
      const keys = batch as string[];
      if (keys.length > 0) await redis.client.unlink(...keys);
    }
    await redis.close();
    await nats.drain();
  });

  it('publishes each human action notice exactly once, and none for history rebuilt at start', async () => {
    expect(noticesAfterStart).toBeGreaterThan(0);
    expect(noticesSeen).toEqual(['nt-r-wr-d:res-d1']);
    expect(noticesSeen).toHaveLength(noticesAfterStart);
  });

  it('GET /v1/inbox filters by kind, why, agent, priority and status, orders by urgency, and pages with a cursor', async () => {
    const open = await get('/v1/inbox');
    expect(open.status).toBe(200);
    const ids = open.body.items!.map((i) => i['id']);
    expect(ids).toEqual(
      expect.arrayContaining(['stop:demo:stop-r-wr-a:res-a1', 'stop:demo:stop-r-wr-d:res-d1', 'handback:demo:hb-h-1', 'escalation:demo:h-3']),
    );
    expect(ids).not.toContain('stop:demo:stop-r-wr-c:res-c1');
    expect(open.body.items!.every((i) => i['status'] === 'open')).toBe(true);

    expect((await get('/v1/inbox?why=policy')).body.items!.map((i) => i['id'])).toEqual(['stop:demo:stop-r-wr-a:res-a1']);
    expect((await get('/v1/inbox?kind=stop,hold')).body.items!.map((i) => i['kind']).sort()).toEqual(['hold', 'stop', 'stop']);
    expect((await get('/v1/inbox?kind=handback&agent=alice')).body.items!.map((i) => i['id'])).toEqual(['handback:demo:hb-h-1']);
    // Ended by a person's answer or decision: `answered`; ended otherwise: `closed`.
    expect((await get('/v1/inbox?status=answered')).body.items!.map((i) => i['id']).sort()).toEqual(['handback:demo:hb-h-2', 'stop:demo:stop-r-wr-c:res-c1']);
    expect((await get('/v1/inbox?status=answered')).body.items!.every((i) => i['closed_by'] !== undefined)).toBe(true);
    expect((await get('/v1/inbox?status=closed')).body.items!).toEqual([]);
    expect((await get('/v1/inbox?status=answered,closed')).body.items!.map((i) => i['id']).sort()).toEqual([
      'handback:demo:hb-h-2',
      'stop:demo:stop-r-wr-c:res-c1',
    ]);
    expect((await get('/v1/inbox?priority=urgent&status=any')).body.items!.map((i) => i['id'])).toEqual(['handback:demo:hb-h-2']);
    const urgent = (await get('/v1/inbox?order=urgent')).body.items!.map((i) => Number(i['urgency']));
    expect(urgent).toEqual([...urgent].sort((a, b) => b - a));

    const paged: unknown[] = [];
    let cursor: string | null | undefined = null;
    do {
      const page: Awaited<ReturnType<typeof get>> = await get(`/v1/inbox?status=any&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(page.status).toBe(200);
      expect(page.body.items!.length).toBeLessThanOrEqual(2);
      paged.push(...page.body.items!.map((i) => i['id']));
      cursor = page.body.next_cursor;
    } while (cursor);
    expect(paged).toEqual((await get('/v1/inbox?status=any&limit=500')).body.items!.map((i) => i['id']));
    // A cursor pages the listing it was returned for: under other filters it is refused, not taken
    // as a position in a listing it was never part of.
    const first = await get('/v1/inbox?status=any&limit=1');
    const next = encodeURIComponent(first.body.next_cursor!);
    expect((await get(`/v1/inbox?status=any&limit=1&cursor=${next}`)).status).toBe(200);
    const refiltered = await get(`/v1/inbox?status=open&limit=1&cursor=${next}`);
    expect({ status: refiltered.status, code: refiltered.body.error?.code }).toEqual({ status: 400, code: 'schema_violation' });
  });

  it('bad query parameters and ids answer 400 with a typed code; unknown ids answer 404', async () => {
    for (const query of [
      'limit=0',
      'limit=abc',
      'limit=0x10',
      'limit=1e2',
      'limit=5.0',
      'limit=%207',
      'limit=501',
      'kind=bogus',
      'order=oldest',
      'colour=red',
      'cursor=not-a-cursor',
      'priority=',
      'project=Bad Project',
    ]) {
      const response = await get(`/v1/inbox?${query}`);
      expect({ query, status: response.status, code: response.body.error?.code }).toEqual({ query, status: 400, code: 'schema_violation' });
    }
    expect((await get('/v1/stops?why=crash')).body.error?.code).toBe('schema_violation');
    // A refusal says what the parameter takes (a typo in a filter is no empty inbox).
    for (const [query, message] of [
      ['/v1/inbox?why=polcy', /why\.0: .*policy.*human_gate.*lease_expired/],
      ['/v1/inbox?status=every', /^status: status takes open, answered, closed .* or any \(all\)$/],
      ['/v1/stops?status=closed', /^status: status takes open, answered .* or any \(all\)$/],
      ['/v1/inbox?limit=0', /^limit: limit is a whole number from 1 to 500, in digits$/],
      ['/v1/inbox?limit=1&limit=2', /^limit: limit is given 2 times; give it once$/],
      ['/v1/inbox?order=newest&order=urgent', /^order: order is given 2 times; give it once$/],
      ['/v1/stops?since=2026-01-01T00:00:00Z&since=2026-01-02T00:00:00Z', /^since: since is given 2 times; give it once$/],
      [`/v1/inbox?${Array.from({ length: 21 }, () => 'kind=stop').join('&')}`, /^kind: at most 20 values/],
    ] as const) {
      const refused = await get(query);
      expect({ query, status: refused.status, code: refused.body.error?.code }).toEqual({ query, status: 400, code: 'schema_violation' });
      expect((refused.body.error as { message?: string }).message).toMatch(message);
    }
    // A path parameter that does not validate is named by the route's name for it; a path segment
    // that is not percent-encoding by the path; and paths are case-sensitive.
    for (const [path, issuePath] of [
      ['/v1/projects/BAD..x/runs/r', 'project'],
      ['/v1/projects/demo/runs/%00', 'id'],
      ['/v1/projects/demo/runs/r/answers/a%20b%2Fc', 'answer_id'],
      ['/v1/runs/%25%ZZ', '(path)'],
    ] as const) {
      const refused = await get(path);
      expect({ path, status: refused.status, code: refused.body.error?.code }).toEqual({ path, status: 400, code: 'schema_violation' });
      expect({ path, issue: (refused.body.error as { issues?: { path: string }[] }).issues?.[0]?.path }).toEqual({ path, issue: issuePath });
    }
    expect((await get('/v1/INBOX')).status).toBe(404);
    // A parameter a listing does not take is named by its path, as on the routes that take none.
    for (const path of ['/v1/inbox?colour=red', '/v1/stops?colour=red', '/v1/events/stream?colour=red']) {
      const refused = await get(path);
      expect({ path, status: refused.status, issues: (refused.body.error as { issues?: unknown }).issues }).toEqual({
        path,
        status: 400,
        issues: [{ path: 'colour', message: 'Unrecognized key' }],
      });
    }
    // A route that takes no query parameters refuses one as the listings do (`?at=` on a run would
    // otherwise silently answer with the present).
    for (const path of ['/v1/runs/nope?at=5', '/v1/projects/demo/runs/wr-a?at=5', '/v1/stops/nope?foo=1', '/v1/handoffs/nope?x=', '/v1/projections?foo=1']) {
      const refused = await get(path);
      expect({ path, status: refused.status, code: refused.body.error?.code }).toEqual({ path, status: 400, code: 'schema_violation' });
      expect((refused.body.error as { message?: string }).message).toMatch(/^this route takes no query parameters; got "(at|foo|x)"$/);
    }
    // Every why an item can carry is a filter the inbox takes.
    expect((await get('/v1/inbox?why=policy,hold,human_gate,lease_expired,rework,guard_failed')).status).toBe(200);
    expect((await get('/v1/stops?since=yesterday')).status).toBe(400);
    expect((await get('/v1/handoffs/bad%20id')).status).toBe(400);
    for (const path of ['/v1/stops/nope', '/v1/handoffs/nope', '/v1/runs/nope']) {
      const response = await get(path);
      expect({ path, status: response.status, code: response.body.error?.code }).toEqual({ path, status: 404, code: 'not_found' });
    }
    // A path no route takes is not a missing record: a client switching on the code tells a wrong URL apart.
    for (const path of ['/v1/nope', '/v1/v1/stops/nope', '/v2/stops/nope']) {
      const response = await get(path);
      expect({ path, status: response.status, code: response.body.error?.code }).toEqual({ path, status: 404, code: 'route_not_found' });
    }
    expect((await post('/v1/v1/runs/wr-b/answer', { action: 'continue' })).body.error?.code).toBe('route_not_found');
  });

  it('GET /v1/stops queries packets by why, run and status; GET /v1/stops/:id returns the packet with its frozen call', async () => {
    const one = await get('/v1/stops/stop-r-wr-a:res-a1');
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({
      stop: {
        packet_id: 'stop-r-wr-a:res-a1',
        why: 'policy',
        status: 'open',
        stop: 'handoff',
        goal_done: false,
        pending: { name: 'refund', args: { amount: 40, order: 99 } },
      },
      effect: null,
    });
    expect(JSON.stringify((one.body['stop'] as { user_msg: string }).user_msg)).not.toMatch(/crash/i);
    expect((await get('/v1/stops?status=answered')).body.items!.map((r) => (r['stop'] as { packet_id: string }).packet_id)).toEqual(['stop-r-wr-c:res-c1']);
    // `any` is every packet, as no status filter is (and as the inbox takes it).
    const every = (await get('/v1/stops')).body.items!.map((r) => (r['stop'] as { packet_id: string }).packet_id);
    expect((await get('/v1/stops?status=any')).body.items!.map((r) => (r['stop'] as { packet_id: string }).packet_id)).toEqual(every);
    expect(every).toContain('stop-r-wr-c:res-c1');
    expect((await get('/v1/stops?run=wr-d')).body.items!.map((r) => (r['stop'] as { why: string }).why)).toEqual(['unknown_intent']);
    expect((await get('/v1/stops?why=budget,policy')).body.items).toHaveLength(2);
    expect((await get('/v1/stops?since=2026-01-01T09:04:30Z')).body.items!.map((r) => (r['stop'] as { packet_id: string }).packet_id)).toEqual([
      'stop-r-wr-d:res-d1',
      'stop-r-wr-c:res-c1',
    ]);
    expect((await get('/v1/stops?until=2026-01-01T09:04:30Z')).body.items!.map((r) => (r['stop'] as { packet_id: string }).packet_id)).toEqual([
      'stop-r-wr-a:res-a1',
    ]);
    // The window is sought, not walked: a window before every packet is one empty last page, a
    // narrow one pages its packets only (each page holds one, the last has no cursor).
    expect((await get('/v1/stops?until=2020-01-01T00:00:00Z&limit=1')).body).toEqual({ items: [], next_cursor: null });
    const windowed: string[] = [];
    let cursor: string | null | undefined = null;
    do {
      const page: Awaited<ReturnType<typeof get>> = await get(
        `/v1/stops?since=2026-01-01T09:04:30Z&limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      expect(page.body.items).toHaveLength(1);
      windowed.push(((page.body.items![0] as Record<string, unknown>)['stop'] as { packet_id: string }).packet_id);
      cursor = page.body.next_cursor;
    } while (cursor);
    expect(windowed).toEqual(['stop-r-wr-d:res-d1', 'stop-r-wr-c:res-c1']);
    // One run's cursor pages that run only, and never the listing of every run.
    const runCursor = Buffer.from(JSON.stringify({ v: 1, r: [0, 'x'], u: 'wr-other' }), 'utf8').toString('base64url');
    const otherRun = await get(`/v1/stops?run=wr-d&cursor=${runCursor}`);
    expect({ status: otherRun.status, code: otherRun.body.error?.code }).toEqual({ status: 400, code: 'schema_violation' });
    expect((otherRun.body.error as unknown as { message: string }).message).toContain('made for run wr-other, not wr-d');
    const everyRun = await get(`/v1/stops?cursor=${runCursor}`);
    expect((everyRun.body.error as unknown as { message: string }).message).toContain("one run's stop packets");
  });

  it('GET /v1/handoffs/:id and /v1/runs/:id return the view and its event timeline', async () => {
    const handoff = await get('/v1/handoffs/h-2');
    expect(handoff.status).toBe(200);
    expect(handoff.body['handoff']).toMatchObject({ id: 'h-2', status: 'completed', priority: 'urgent', handback_id: 'hb-h-2' });
    expect((handoff.body['timeline'] as Array<{ type: string }>).map((t) => t.type)).toEqual([
      'handoff.created',
      'handoff.claimed',
      'handoff.returned',
      'handoff.completed',
    ]);
    const run = await get('/v1/runs/wr-a');
    expect(run.body['run']).toMatchObject({
      status: 'stopped',
      open_stop_id: 'stop-r-wr-a:res-a1',
      step: 'triage',
      agent: 'issue',
      hops: 1,
      callback: null,
      workflow: { name: 'feature', version: 1 },
    });
    expect((run.body['timeline'] as Array<{ type: string; seq: number }>).map((t) => t.type)).toEqual([
      'run.started',
      'run.routed',
      'run.result_recorded',
      'run.stopped',
      'run.notice_emitted',
    ]);
    expect(run.body['handoffs']).toEqual(
      expect.arrayContaining([
        { project: 'demo', id: 'h-1' },
        { project: 'demo', id: 'h-2' },
        { project: 'demo', id: 'h-3' },
      ]),
    );
  });

  it('answering a stop packet publishes exactly one message to the answer subject; a retry with the same answer_id is deduplicated', async () => {
    const subject = Subjects.operatorAnswer(prefix, 'demo');
    const body = { answer_id: 'ans-http-1', action: 'deny', note: 'not without a receipt', answered_by: 'olga' };
    const first = await post('/v1/stops/stop-r-wr-a:res-a1/answer', body);
    const statusUrl = '/v1/projects/demo/runs/wr-a/answers/ans-http-1';
    // No router decides it here: 202 `pending` with the status link (which says pending too).
    expect(first).toEqual({
      status: 202,
      body: {
        accepted: true,
        outcome: 'pending',
        answer_id: 'ans-http-1',
        project: 'demo',
        workflow_run_id: 'wr-a',
        subject,
        duplicate: false,
        status_url: statusUrl,
      },
    });
    expect((await get(statusUrl)).body).toMatchObject({ outcome: 'pending', answer_id: 'ans-http-1', workflow_run_id: 'wr-a' });
    expect((await post('/v1/stops/stop-r-wr-a:res-a1/answer', body)).body['duplicate']).toBe(true);
    await nats.connection.flush();
    const info = await nats.jsm.streams.info(streams.inbox, { subjects_filter: subject });
    expect(info.state.subjects?.[subject]).toBe(1);
    // What the router's durable consumer will read: the one stored message.
    const stored = await nats.jsm.streams.getMessage(streams.inbox, { last_by_subj: subject });
    expect(JSON.parse(decoder.decode(stored.data))).toMatchObject({
      workflow_run_id: 'wr-a',
      project: 'demo',
      actor_role: 'operator',
      answer: { kind: 'stop_answer', answer: { packet_id: 'stop-r-wr-a:res-a1', answer_id: 'ans-http-1', action: 'deny', answered_by: 'olga' } },
    });
  });

  it('answering a packet that is not open fails closed with 409 stop_already_answered; a button the form lacks is refused', async () => {
    const answered = await post('/v1/stops/stop-r-wr-c:res-c1/answer', { action: 'deny', answered_by: 'olga' });
    expect(answered).toMatchObject({ status: 409, body: { error: { code: 'stop_already_answered' } } });
    expect((await post('/v1/stops/stop-r-wr-a:res-a1/answer', { action: 'raise_cap', cap: 10, answered_by: 'olga' })).body.error?.code).toBe(
      'answer_not_allowed',
    );
    expect((await post('/v1/stops/stop-r-wr-a:res-a1/answer', { action: 'approve', answered_by: 'olga' })).body.error?.code).toBe('stale_answer');
    expect((await post('/v1/stops/stop-r-wr-a:res-a1/answer', { action: 'deny', colour: 'red' })).body.error?.code).toBe('schema_violation');
    // A cap goes with a raise_cap, an intent with an intent answer: with another button either would be dropped unread.
    const capped = await post('/v1/stops/stop-r-wr-a:res-a1/answer', { action: 'deny', cap: 50 });
    expect(capped).toMatchObject({
      status: 400,
      body: { error: { code: 'schema_violation', issues: [{ path: 'cap', message: 'only a raise_cap answer names a cap; this one is deny' }] } },
    });
    const intended = await post('/v1/stops/stop-r-wr-a:res-a1/answer', { action: 'approve', intent: 'refund' });
    expect(intended).toMatchObject({
      status: 400,
      body: { error: { code: 'schema_violation', issues: [{ path: 'intent', message: 'only an intent answer names an intent; this one is approve' }] } },
    });
    expect((await post('/v1/stops/stop-r-wr-a:res-a1/answer', '{"action": ')).body.error?.code).toBe('malformed_json');
    expect((await post('/v1/stops/nope/answer', { action: 'deny', answered_by: 'olga' })).status).toBe(404);
  });

  it('answering a hold publishes a hold answer; a run that is not held answers 409 run_not_held', async () => {
    const held = await post('/v1/runs/wr-b/answer', { answer_id: 'ans-hold-1', action: 'continue', answered_by: 'olga' });
    expect(held).toMatchObject({ status: 202, body: { accepted: true, outcome: 'pending', answer_id: 'ans-hold-1' } });
    expect((await post('/v1/runs/wr-a/answer', { action: 'continue', answered_by: 'olga' })).body.error?.code).toBe('run_not_held');
    expect((await post('/v1/runs/wr-b/answer', { action: 'reroute', answered_by: 'olga' })).body.error?.code).toBe('schema_violation');
    // A target goes with a reroute only: with terminate or continue it would be dropped unread.
    for (const action of ['terminate', 'continue']) {
      const refused = await post('/v1/runs/wr-b/answer', { action, target: 'reviewer' });
      expect({ action, status: refused.status, body: refused.body }).toMatchObject({
        action,
        status: 400,
        body: { error: { code: 'schema_violation', issues: [{ path: 'target', message: `only a reroute names a target, not a ${action}` }] } },
      });
    }
  });

  it('an answer_id already used for another answer of the run is refused 409 answer_id_reused (the stream would have dropped it as a duplicate); on another run it is another answer; a true retry is not', async () => {
    const subject = Subjects.operatorAnswer(prefix, 'demo');
    const stored = async () => (await nats.jsm.streams.info(streams.inbox, { subjects_filter: subject })).state.subjects?.[subject];
    // ans-http-1 answered wr-a's stop packet (above). Answer ids need be unique only within a run:
    // on wr-b it names another answer, stored under a message id that names wr-b.
    const elsewhere = await post('/v1/runs/wr-b/answer', { answer_id: 'ans-http-1', action: 'continue', note: 'wr-b has its own ans-http-1' });
    expect(elsewhere).toMatchObject({ status: 202, body: { answer_id: 'ans-http-1', duplicate: false, workflow_run_id: 'wr-b' } });
    const before = await stored();
    // The same packet with another action or note is another answer of that run.
    const changed = await post('/v1/stops/stop-r-wr-a:res-a1/answer', { answer_id: 'ans-http-1', action: 'deny', note: 'changed my mind' });
    expect(changed.body.error?.code).toBe('answer_id_reused');
    // The hold answer sent again as it was (its time aside) is a retry: accepted, marked duplicate.
    const retry = await post('/v1/runs/wr-b/answer', { answer_id: 'ans-hold-1', action: 'continue' });
    expect(retry).toMatchObject({ status: 202, body: { answer_id: 'ans-hold-1', duplicate: true } });
    expect(await stored()).toBe(before);
  });

  it('an answered packet: its recorded answer_id sent again as it was answers the outcome again (duplicate); with another action or note it is 409 answer_id_reused', async () => {
    // stop-r-wr-c:res-c1 was answered deny by olga with ans-c1, and the router applied it.
    const retry = await post('/v1/stops/stop-r-wr-c:res-c1/answer', { answer_id: 'ans-c1', action: 'deny' });
    expect(retry).toMatchObject({ status: 200, body: { answer_id: 'ans-c1', duplicate: true, outcome: 'applied', workflow_run_id: 'wr-c' } });
    const otherAction = await post('/v1/stops/stop-r-wr-c:res-c1/answer', { answer_id: 'ans-c1', action: 'acknowledge' });
    expect(otherAction).toMatchObject({
      status: 409,
      body: { error: { code: 'answer_id_reused', details: { answer_id: 'ans-c1', project: 'demo', used_for: { workflow_run_id: 'wr-c' } } } },
    });
    const otherNote = await post('/v1/stops/stop-r-wr-c:res-c1/answer', { answer_id: 'ans-c1', action: 'deny', note: 'changed my mind' });
    expect(otherNote).toMatchObject({ status: 409, body: { error: { code: 'answer_id_reused' } } });
    // Another answer_id is another answer: the packet is not open.
    expect((await post('/v1/stops/stop-r-wr-c:res-c1/answer', { answer_id: 'ans-c1-b', action: 'deny' })).body.error?.code).toBe('stop_already_answered');
    // The refused answer was never sent: its status is not found (not `pending` forever); the applied one is applied.
    expect(await get('/v1/projects/demo/runs/wr-c/answers/ans-c1-b')).toMatchObject({ status: 404, body: { error: { code: 'answer_not_found' } } });
    expect(await get('/v1/projects/demo/runs/wr-c/answers/ans-c1')).toMatchObject({ status: 200, body: { outcome: 'applied' } });
  });

  it('POST /v1/handoffs/:id/decision sends decide_handback to the ledger as the operator and maps its refusal to 409 with the code', async () => {
    const requests: Array<Record<string, unknown>> = [];
    // The notifier speaks as op.notifier and names the token's operator and role in the body.
    const ledger = nats.connection.subscribe(ledgerCommandSubject(prefix, 'demo', Principals.operator('notifier'), 'decide_handback'), {
      callback: (_err, msg) => {
        const body = JSON.parse(decoder.decode(msg.data)) as Record<string, unknown>;
        requests.push(body);
        const reply =
          requests.length === 1
            ? { ok: false, error: { code: 'handoff_not_pending', kind: 'wrong_state', message: 'the handback was already decided' } }
            : { ok: false, error: { code: 'handback_self_review', kind: 'forbidden', message: 'no' } };
        msg.respond(new TextEncoder().encode(JSON.stringify(reply)));
      },
    });
    await nats.connection.flush();
    const refused = await post('/v1/handoffs/hb-h-1/decision', { decision: 'rework', note: 'add tests', actor: 'olga', idempotency_key: 'k-1' });
    expect(refused).toMatchObject({
      status: 409,
      body: { error: { code: 'handoff_not_pending', details: { outcome: 'refused', handoff_id: 'hb-h-1', project: 'demo' } } },
    });
    expect(requests[0]).toEqual({ handoff_id: 'hb-h-1', decision: 'rework', note: 'add tests', idempotency_key: 'k-1', actor: 'olga', actor_role: 'operator' });
    // The ledger's forbidden refusal is a 403 (the body's actor, when sent, is the token's name: another is refused before the ledger is asked).
    expect((await post('/v1/handoffs/hb-h-1/decision', { decision: 'accept', actor: 'olga' })).status).toBe(403);
    expect((await post('/v1/handoffs/hb-h-1/decision', { decision: 'rework', actor: 'olga' })).body.error?.code).toBe('schema_violation');
    expect((await post('/v1/handoffs/nope/decision', { decision: 'accept', actor: 'olga' })).status).toBe(404);
    ledger.unsubscribe();
  });

  it('GET /openapi.json is an OpenAPI 3.1 document with every route; GET /docs links it', async () => {
    const doc = await get('/openapi.json');
    expect(doc.status).toBe(200);
    expect(doc.body['openapi']).toBe('3.1.0');
    const paths = doc.body['paths'] as Record<string, Record<string, unknown>>;
    expect(Object.keys(paths).sort()).toEqual(
      [
        '/docs',
        '/health/live',
        '/health/ready',
        '/openapi.json',
        '/v1/events/stream',
        '/v1/handoffs/{id}',
        '/v1/handoffs/{id}/decision',
        '/v1/handoffs/{id}/abandon',
        '/v1/inbox',
        '/v1/projections',
        '/v1/runs/{id}',
        '/v1/runs/{id}/answer',
        '/v1/meshes/{id}',
        '/v1/stops',
        '/v1/stops/{id}',
        '/v1/stops/{id}/answer',
        '/v1/projects/{project}',
        '/v1/projects/{project}/pause',
        '/v1/projects/{project}/resume',
        '/v1/projects/{project}/runs/{id}',
        '/v1/projects/{project}/runs/{id}/answer',
        '/v1/projects/{project}/runs/{id}/answers/{answer_id}',
        '/v1/projects/{project}/meshes/{id}',
        '/v1/projects/{project}/meshes/{id}/answers/{answer_id}',
        '/v1/projects/{project}/notices/{notice_id}/redeliver',
        '/v1/projects/{project}/webhooks',
        '/v1/projects/{project}/handoffs/{id}',
        '/v1/projects/{project}/handoffs/{id}/decision',
        '/v1/projects/{project}/handoffs/{id}/abandon',
        '/v1/projects/{project}/stops/{id}',
        '/v1/projects/{project}/stops/{id}/answer',
      ].sort(),
    );
    expect(Object.keys(paths['/v1/stops/{id}/answer']!)).toEqual(['post']);
    // The health routes README lists are in the document, and answer as it says.
    for (const [path, schema] of [
      ['/health/live', HealthLiveSchema],
      ['/health/ready', HealthReadySchema],
    ] as const) {
      const answer = await get(path);
      expect(answer.status).toBe(200);
      expect(schema.safeParse(answer.body).error).toBeUndefined();
      expect((paths[path]!['get'] as { responses: Record<string, { content?: unknown }> }).responses['200']!.content).toBeDefined();
    }
    // A viewer's answer (role_forbidden) and an agent's (answer_forbidden: its role may not answer) are 403.
    for (const path of ['/v1/stops/{id}/answer', '/v1/projects/{project}/stops/{id}/answer']) {
      expect(Object.keys((paths[path]!['post'] as { responses: Record<string, unknown> }).responses)).toContain('403');
    }
    const inboxParams = (paths['/v1/inbox']!['get'] as { parameters: Array<{ name: string }> }).parameters.map((p) => p.name);
    expect(inboxParams).toEqual(['project', 'kind', 'why', 'agent', 'priority', 'status', 'order', 'limit', 'cursor']);
    // An enum filter says which values the server takes (it refuses any other: 400).
    // A list filter is one value or a comma list (a string with the enum's pattern), or the same repeated (an array of them).
    const param = (name: string) =>
      (paths['/v1/inbox']!['get'] as { parameters: Array<{ name: string; schema: { anyOf: Array<{ type: string; pattern?: string }> } }> }).parameters.find(
        (p) => p.name === name,
      )!;
    for (const [name, ok, bad] of [
      ['kind', 'stop,hold', 'nope'],
      ['priority', 'high, urgent', 'HIGH'],
    ] as const) {
      const pattern = new RegExp(param(name).schema.anyOf.find((s) => s.type === 'string')!.pattern!);
      expect([pattern.test(ok), pattern.test(bad)]).toEqual([true, false]);
      expect(param(name).schema.anyOf.map((s) => s.type)).toEqual(['string', 'array']);
    }
    // Repeated is the same as a comma list; a bad value among them is still 400.
    const repeated = await get('/v1/inbox?kind=stop&kind=hold&status=any');
    const listed = await get('/v1/inbox?kind=stop,hold&status=any');
    expect(repeated.status).toBe(200);
    expect(repeated.body).toEqual(listed.body);
    expect((await get('/v1/inbox?kind=stop&kind=nope')).status).toBe(400);
    const page = await fetch(`${base}/docs`);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    expect(await page.text()).toContain('/openapi.json');
  });

  it('projections lost from Redis (every key of this deployment deleted) are noticed by the notifier and rebuilt from the stream: the same snapshot as before', async () => {
    const store = createProjectionStore({ redis: redis.client, prefix: projectionPrefix(prefix) });
    const before = await Promise.all(PROJECTIONS.map((name) => store.snapshot(name)));
    expect(Object.keys(before[0]!.keys).length).toBeGreaterThan(0);
    // What a FLUSHALL does to this deployment, without touching the other tests' keys: every
    // projection key of this prefix gone at once (one UNLINK is atomic).
    const keys: string[] = [];
    for await (const batch of redis.client.scanStream({ match: `${projectionPrefix(prefix)}:*`, count: 1000 })) keys.push(...(batch as string[]));
    expect(keys.length).toBeGreaterThan(10);
    await redis.client.unlink(...keys);
    let after: Awaited<ReturnType<typeof store.snapshot>>[] = [];
    for (let i = 0; i < 100; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      after = await Promise.all(PROJECTIONS.map((name) => store.snapshot(name).catch(() => null))).then((list) =>
        list.every((x) => x !== null) ? (list as typeof after) : [],
      );
      if (after.length === PROJECTIONS.length && after.every((snap, j) => snap.lastSeq === before[j]!.lastSeq && diffSnapshots(before[j]!, snap).length === 0))
        break;
    }
    expect(after).toHaveLength(PROJECTIONS.length);
    for (let i = 0; i < PROJECTIONS.length; i++) {
      expect(diffSnapshots(before[i]!, after[i]!)).toEqual([]);
      expect(after[i]!.lastSeq).toBe(before[i]!.lastSeq);
    }
    // A rebuild is not a new notice: nothing was published again.
    expect(noticesSeen).toEqual(['nt-r-wr-d:res-d1']);
  });

  it('a handoff mesh stop: its one notice is published, and answering its packet publishes a mesh answer on mesh_answer (not a run answer)', async () => {
    const now = new Date().toISOString();
    const mesh = MeshDefinitionSchema.parse({ name: 'support', entry: 'triage', handoffs: { triage: ['billing'], billing: ['triage'] }, max_iterations: 2 });
    // Each turn under its agent's claim on the turn's handoff (the claim rule), as the router read it.
    const turn = (resultId: string, agent: string, target: string, handoffId: string): MeshCommand => ({
      type: 'record_turn',
      data: {
        result_id: resultId,
        run_id: `ar-${resultId}`,
        agent,
        text: `${agent} hands to ${target}`,
        handoff_tool_calls: [{ tool: handoffToolName(target) }],
        handoff_id: handoffId,
        claim_id: `c-${handoffId}`,
        handoff: { handoff_id: handoffId, status: 'claimed', claim: { claim_id: `c-${handoffId}`, claimed_by: agent } },
      },
      metadata: { now, actor: agent },
    });
    const commands: MeshCommand[] = [
      {
        type: 'start_mesh',
        data: { mesh_run_id: 'mesh-n1', project: 'demo', mesh, agents: ['triage', 'billing'], started_by: 'sam' },
        metadata: { now, actor: 'sam' },
      },
      turn('mn-1', 'triage', 'billing', meshEntryHandoffId('mesh-n1')),
      turn('mn-2', 'billing', 'triage', meshHandoffId('mesh-n1', 'mn-1')),
    ];
    const ref = { project: 'demo', kind: 'mesh', id: 'mesh-n1' } as const;
    for (const command of commands) {
      const result = await events.handleCommand<MeshCommand, MeshEvent, ReturnType<typeof meshDecider.initialState>>(ref, meshDecider, command, {
        commandId: `cmd-${++commandCount}`,
        occurredAt: now,
        actor: command.metadata.actor,
        origin: 'agent',
        causationId: null,
        correlationId: 'mesh-n1',
      });
      if (!result.ok) throw new Error(result.error.code);
    }
    await caughtUp();
    await nats.connection.flush();
    const packetId = meshStopId('mesh-n1', 'mn-2');
    expect(noticesSeen.filter((id) => id.startsWith('nt-mt-'))).toEqual(['nt-mt-mesh-n1:mn-2']);
    expect((await get(`/v1/stops/${packetId}`)).body).toMatchObject({ mesh_run_id: 'mesh-n1', stop: { why: 'thrash', next_form: { kind: 'raise_cap' } } });
    // A mesh's cap field states every limit its answer is held to (above the cap, whole, at most 1000).
    const meshStop = (await get(`/v1/stops/${packetId}`)).body as unknown as { stop: StopPacket };
    const capField = meshStop.stop.next_form?.fields.find((f) => f.id === 'cap');
    expect(capField).toMatchObject({ kind: 'number', whole: true, at_most: 1000 });

    const runAnswerCount = async () =>
      Object.values((await nats.jsm.streams.info(streams.inbox, { subjects_filter: Subjects.operatorAnswer(prefix, 'demo') })).state.subjects ?? {}).reduce(
        (a, b) => a + b,
        0,
      );
    const runAnswersBefore = await runAnswerCount();
    const subject = Subjects.meshAnswer(prefix, 'demo');
    expect((await post(`/v1/stops/${packetId}/answer`, { action: 'raise_cap', cap: 2 })).body.error?.code).toBe('cap_not_raised');
    // The limits the form states are checked before publishing, like the cap's floor: 400, not a 409 from the router.
    for (const cap of [3.5, 1001]) {
      const refused = await post(`/v1/stops/${packetId}/answer`, { action: 'raise_cap', cap });
      expect({ cap, status: refused.status, code: refused.body.error?.code }).toEqual({ cap, status: 400, code: 'answer_incomplete' });
    }
    // A form sends the cap as text: read as the number it writes (here still not above the cap), or refused when it is not one.
    const formPost = async (form: string) =>
      (await (
        await fetch(`${base}/v1/projects/demo/stops/${packetId}/answer`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Bearer ${token}` },
          body: form,
        })
      ).json()) as { error?: { code: string } };
    expect((await formPost('action=raise_cap&cap=2')).error?.code).toBe('cap_not_raised');
    expect((await formPost('action=raise_cap&cap=two')).error?.code).toBe('schema_violation');
    const accepted = await post(`/v1/stops/${packetId}/answer`, { answer_id: 'ans-mesh-1', action: 'raise_cap', cap: 6 });
    expect(accepted).toEqual({
      status: 202,
      body: {
        accepted: true,
        outcome: 'pending',
        answer_id: 'ans-mesh-1',
        project: 'demo',
        workflow_run_id: 'mesh-n1',
        mesh_run_id: 'mesh-n1',
        subject,
        duplicate: false,
        status_url: '/v1/projects/demo/meshes/mesh-n1/answers/ans-mesh-1',
      },
    });
    const stored = await nats.jsm.streams.getMessage(streams.inbox, { last_by_subj: subject });
    expect(JSON.parse(decoder.decode(stored.data))).toMatchObject({
      mesh_run_id: 'mesh-n1',
      project: 'demo',
      actor_role: 'operator',
      answer: { packet_id: packetId, answer_id: 'ans-mesh-1', action: 'raise_cap', cap: 6, answered_by: 'olga' },
    });
    expect(await runAnswerCount()).toBe(runAnswersBefore); // nothing went to the runs' answer subject
  });
  it('a hold answer sent again after the router applied it answers its outcome again (duplicate); the same answer_id with another action is 409 answer_id_reused', async () => {
    // The router's decision on wr-b's hold, as the router would append it (no router runs here).
    const resumeOfC = scenarioSteps().find((s) => s.aggregate === 'run' && s.id === 'wr-c' && s.command.type === 'resume') as ScenarioStep;
    const { workflow, agents } = resumeOfC.command.data as { workflow: unknown; agents: unknown };
    const at = new Date().toISOString();
    const answer = { answer_id: 'ans-hold-applied', action: 'continue', answered_by: 'olga', answered_at: at };
    await append([
      {
        aggregate: 'run',
        id: 'wr-b',
        actor: 'olga',
        origin: 'operator',
        command: {
          type: 'resume',
          data: { answer: { kind: 'hold_answer', answer }, workflow, agents },
          metadata: { now: at, actor: 'olga', actorRole: 'operator' },
        },
      } as ScenarioStep,
    ]);
    await caughtUp();
    expect((await get('/v1/projects/demo/runs/wr-b')).body).toMatchObject({ run: { status: 'running' } });

    const retry = await post('/v1/projects/demo/runs/wr-b/answer', { answer_id: 'ans-hold-applied', action: 'continue' });
    expect(retry).toMatchObject({ status: 200, body: { outcome: 'applied', answer_id: 'ans-hold-applied', duplicate: true, workflow_run_id: 'wr-b' } });
    const other = await post('/v1/projects/demo/runs/wr-b/answer', { answer_id: 'ans-hold-applied', action: 'terminate', note: 'stop it' });
    expect(other).toMatchObject({ status: 409, body: { error: { code: 'answer_id_reused' } } });
    // A new answer to a run that is no longer held is still refused as before.
    expect((await post('/v1/projects/demo/runs/wr-b/answer', { action: 'continue' })).body.error?.code).toBe('run_not_held');
  });
});
