import { randomBytes } from 'node:crypto';
import { Subjects, type HandoffEvent } from '@baton/contracts';
import { handoffDecider, type HandoffCommand } from '@baton/domain';
import { batonStreamNames } from '@baton/eventstore';
import { handbackCycle, holdRun, startFixture, startRun, stopRun, type NotifierFixture } from '../web/console-fixture.int-support';

/**
 * Issue 11 / 14: runs, handoffs and stop packets are addressed by project and id. The same
 * workflow_run_id, handoff id and stop packet id exist in projects alpha and beta; each project's
 * record is read and answered through the project routes; the id-only routes answer 409
 * `ambiguous_id` for a shared id and 200 for an id one project holds; a token never reaches
 * another project's record.
 */

const decoder = new TextDecoder();
let fx: NotifierFixture;
let both: string;
let alphaOnly: string;

interface Reply {
  status: number;
  headers: Headers;
  text: string;
  json: () => Record<string, unknown> & { error?: { code: string; details?: Record<string, unknown> } };
}

async function call(path: string, init: RequestInit & { token?: string; cookie?: string } = {}): Promise<Reply> {
  const headers = new Headers(init.headers);
  if (init.token) headers.set('authorization', `Bearer ${init.token}`);
  if (init.cookie) headers.set('cookie', init.cookie);
  const response = await fetch(`${fx.base}${path}`, { ...init, headers, redirect: 'manual' });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, json: () => JSON.parse(text) };
}

const post = (path: string, token: string, body: unknown) =>
  call(path, { method: 'POST', token, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
const form = (fields: Record<string, string>) => ({
  method: 'POST',
  headers: { 'content-type': 'application/x-www-form-urlencoded' },
  body: new URLSearchParams(fields).toString(),
});

async function signIn(token: string): Promise<string> {
  const page = await call('/login');
  const loginCsrf = /name="_csrf" value="([^"]+)"/.exec(page.text)![1]!;
  const loginCookie = page.headers.get('set-cookie')!.split(';')[0]!;
  const done = await call('/login', { ...form({ _csrf: loginCsrf, token, next: '/inbox' }), cookie: loginCookie });
  expect(done.status).toBe(303);
  return done.headers
    .getSetCookie()
    .find((c) => c.startsWith('baton_session='))!
    .split(';')[0]!;
}

/** Every operator answer stored on a project's answer subject. */
async function answersOn(project: string): Promise<Array<Record<string, unknown>>> {
  await fx.nats.connection.flush();
  const subject = Subjects.operatorAnswer(fx.prefix, project);
  const stream = batonStreamNames(fx.prefix).inbox;
  const info = await fx.nats.jsm.streams.info(stream, { subjects_filter: subject });
  const out: Array<Record<string, unknown>> = [];
  if ((info.state.subjects?.[subject] ?? 0) === 0) return out;
  for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
    const msg = await fx.nats.jsm.streams.getMessage(stream, { seq }).catch(() => null);
    if (msg && msg.subject === subject) out.push(JSON.parse(decoder.decode(msg.data)) as Record<string, unknown>);
  }
  return out;
}

/** Create a handoff for carol and let her claim it (no return): beta's ho-same. */
async function createAndClaim(project: string, id: string): Promise<void> {
  const now = new Date(Date.UTC(2026, 1, 1, 11, 0)).toISOString();
  const commands: HandoffCommand[] = [
    {
      type: 'create',
      data: {
        handoff_id: id,
        project,
        kind: 'task',
        priority: 'low',
        from_agent: 'dave',
        to_agent: 'carol',
        summary: `${project} summary`,
        context: {},
        acceptance: {},
        max_retries: 3,
        workflow_run_id: 'wr-same',
        idempotency_key: `create:${id}`,
      },
      metadata: { now, actor: 'dave', actorKind: 'agent' },
    } as HandoffCommand,
    {
      type: 'claim',
      data: { handoff_id: id, claim_id: 'c-carol', lease_ms: 600_000, claimer_roles: [], idempotency_key: `claim:${id}` },
      metadata: { now, actor: 'carol', actorKind: 'agent' },
    } as HandoffCommand,
  ];
  for (const command of commands) {
    const result = await fx.events.handleCommand<HandoffCommand, HandoffEvent, ReturnType<typeof handoffDecider.initialState>>(
      { project, kind: 'handoff', id },
      handoffDecider,
      command,
      {
        commandId: `cmd-${randomBytes(4).toString('hex')}`,
        occurredAt: now,
        actor: command.metadata.actor,
        origin: 'agent',
        causationId: null,
        correlationId: id,
      },
    );
    if (!result.ok) throw new Error(`${command.type} refused: ${result.error.code}`);
  }
}

describe('records addressed by project and id: project routes, id-only routes, token scoping (real NATS, Redis and HTTP)', () => {
  beforeAll(async () => {
    fx = await startFixture();
    both = await fx.token('olga', 'operator', ['alpha', 'beta']);
    alphaOnly = await fx.token('alma', 'operator', ['alpha']);
    // The same run id, stop packet id and handoff id in both projects, each with its own story.
    await startRun(fx.events, 'alpha', 'wr-same');
    await stopRun(fx.events, 'alpha', 'wr-same', { packet_id: 'stop-same', why: 'policy', tried: [], pending: { name: 'refund', args: { amount: 5 } } });
    await startRun(fx.events, 'beta', 'wr-same', 1);
    await stopRun(
      fx.events,
      'beta',
      'wr-same',
      { packet_id: 'stop-same', why: 'budget', tried: ['search'], cap: { name: 'tool_calls', limit: 8, used: 8 } },
      2,
    );
    await handbackCycle(fx.events, 'alpha', 'ho-same', 'alpha summary', 'alpha report');
    await createAndClaim('beta', 'ho-same');
    // A handback of the same id open in both projects, and ids only one project holds.
    await handbackCycle(fx.events, 'alpha', 'ho-twice', 'alpha twice', 'r');
    await handbackCycle(fx.events, 'beta', 'ho-twice', 'beta twice', 'r');
    await startRun(fx.events, 'alpha', 'wr-alpha-only');
    await holdRun(fx.events, 'alpha', 'wr-alpha-only', 'needs a decision');
    await fx.caughtUp();
  });

  afterAll(async () => {
    await fx?.close();
  });

  it('the project routes read each project its own handoff (claim and timeline), run (timeline, handoffs) and stop packet', async () => {
    const alpha = (await call('/v1/projects/alpha/handoffs/ho-same', { token: both })).json();
    const beta = (await call('/v1/projects/beta/handoffs/ho-same', { token: both })).json();
    expect(alpha['handoff']).toMatchObject({ id: 'ho-same', project: 'alpha', status: 'returned', to_agent: 'bob', summary: 'alpha summary' });
    expect(beta['handoff']).toMatchObject({
      id: 'ho-same',
      project: 'beta',
      status: 'claimed',
      to_agent: 'carol',
      claimed_by: 'carol',
      claim_id: 'c-carol',
      summary: 'beta summary',
    });
    const types = (view: Record<string, unknown>) => (view['timeline'] as Array<{ type: string }>).map((t) => t.type);
    expect(types(alpha)).toEqual(['handoff.created', 'handoff.claimed', 'handoff.returned']);
    expect(types(beta)).toEqual(['handoff.created', 'handoff.claimed']);
    const seqs = (view: Record<string, unknown>) => (view['timeline'] as Array<{ seq: number }>).map((t) => t.seq);
    expect(seqs(alpha).filter((s) => seqs(beta).includes(s))).toEqual([]);

    const alphaRun = (await call('/v1/projects/alpha/runs/wr-same', { token: both })).json();
    const betaRun = (await call('/v1/projects/beta/runs/wr-same', { token: both })).json();
    expect(alphaRun['run']).toMatchObject({ workflow_run_id: 'wr-same', project: 'alpha', status: 'stopped', open_stop_id: 'stop-same' });
    expect(betaRun['run']).toMatchObject({ workflow_run_id: 'wr-same', project: 'beta', status: 'stopped', open_stop_id: 'stop-same' });
    expect(seqs(alphaRun).filter((s) => seqs(betaRun).includes(s))).toEqual([]);
    expect(betaRun['handoffs']).toEqual([{ project: 'beta', id: 'ho-same' }]);
    expect(alphaRun['handoffs']).toEqual([]);

    expect((await call('/v1/projects/alpha/stops/stop-same', { token: both })).json()['stop']).toMatchObject({ project: 'alpha', why: 'policy' });
    expect((await call('/v1/projects/beta/stops/stop-same', { token: both })).json()['stop']).toMatchObject({ project: 'beta', why: 'budget' });
    expect((await call('/v1/projects/beta/runs/wr-alpha-only', { token: both })).status).toBe(404);
    expect((await call('/v1/projects/Bad:Project/runs/wr-same', { token: both })).status).toBe(400);
  });

  it('the id-only routes answer 409 ambiguous_id naming the projects for a shared id, 200 for an id one visible project holds, 404 for none', async () => {
    for (const path of ['/v1/handoffs/ho-same', '/v1/runs/wr-same', '/v1/stops/stop-same', '/v1/handoffs/hb-ho-twice']) {
      const reply = await call(path, { token: both });
      expect({ path, status: reply.status, code: reply.json().error?.code, projects: reply.json().error?.details?.['projects'] }).toEqual({
        path,
        status: 409,
        code: 'ambiguous_id',
        projects: ['alpha', 'beta'],
      });
    }
    expect((await call('/v1/runs/wr-alpha-only', { token: both })).json()['run']).toMatchObject({ project: 'alpha', status: 'held' });
    expect((await call('/v1/handoffs/hb-ho-same', { token: both })).json()['handoff']).toMatchObject({ project: 'alpha', kind: 'completion_handback' });
    expect((await call('/v1/handoffs/nope', { token: both })).status).toBe(404);
    // For a token of alpha alone the shared ids are unambiguous: beta is neither counted nor named.
    const alphaView = await call('/v1/handoffs/ho-same', { token: alphaOnly });
    expect(alphaView.status).toBe(200);
    expect(alphaView.json()['handoff']).toMatchObject({ project: 'alpha', summary: 'alpha summary' });
    expect((await call('/v1/stops/stop-same', { token: alphaOnly })).json()['stop']).toMatchObject({ project: 'alpha', why: 'policy' });
  });

  it("a token never reads or acts on another project's record: the project routes answer 404 and nothing is published", async () => {
    for (const path of ['/v1/projects/beta/handoffs/ho-same', '/v1/projects/beta/runs/wr-same', '/v1/projects/beta/stops/stop-same']) {
      const reply = await call(path, { token: alphaOnly });
      expect({ path, status: reply.status, code: reply.json().error?.code }).toEqual({ path, status: 404, code: 'not_found' });
    }
    expect((await post('/v1/projects/beta/stops/stop-same/answer', alphaOnly, { action: 'deny' })).status).toBe(404);
    expect((await post('/v1/projects/beta/runs/wr-same/answer', alphaOnly, { action: 'continue' })).status).toBe(404);
    expect((await post('/v1/projects/beta/handoffs/hb-ho-twice/decision', alphaOnly, { decision: 'accept' })).status).toBe(404);
    expect((await post('/v1/projects/beta/handoffs/ho-same/abandon', alphaOnly, { reason: 'not mine' })).status).toBe(404);
    expect(await answersOn('beta')).toEqual([]);
  });

  it('answers: an ambiguous id-only answer is refused 409 before anything is published; the project route answers that project', async () => {
    const ambiguous = await post('/v1/stops/stop-same/answer', both, { answer_id: 'ans-amb', action: 'deny' });
    expect(ambiguous.status).toBe(409);
    expect(ambiguous.json().error).toMatchObject({ code: 'ambiguous_id', details: { projects: ['alpha', 'beta'] } });
    expect(await answersOn('alpha')).toEqual([]);
    expect(await answersOn('beta')).toEqual([]);

    const accepted = await post('/v1/projects/beta/stops/stop-same/answer', both, { answer_id: 'ans-beta', action: 'deny' });
    expect(accepted.status).toBe(202); // no router here: published, pending
    expect(accepted.json()).toMatchObject({
      accepted: true,
      outcome: 'pending',
      project: 'beta',
      workflow_run_id: 'wr-same',
      subject: Subjects.operatorAnswer(fx.prefix, 'beta'),
      status_url: '/v1/projects/beta/runs/wr-same/answers/ans-beta',
    });
    expect(await answersOn('beta')).toEqual([
      expect.objectContaining({
        project: 'beta',
        workflow_run_id: 'wr-same',
        answer: expect.objectContaining({ answer: expect.objectContaining({ packet_id: 'stop-same', answer_id: 'ans-beta' }) }),
      }),
    ]);
    expect(await answersOn('alpha')).toEqual([]);

    const hold = await post('/v1/runs/wr-alpha-only/answer', both, { answer_id: 'ans-hold', action: 'continue' });
    expect(hold.json()).toMatchObject({ accepted: true, project: 'alpha', workflow_run_id: 'wr-alpha-only' });
  });

  it("decisions: the id-only route refuses a shared handback id 409; the project route sends the decision to that project's ledger subject", async () => {
    expect((await post('/v1/handoffs/hb-ho-twice/decision', both, { decision: 'accept' })).json().error?.code).toBe('ambiguous_id');
    const seen: Array<{ subject: string; body: Record<string, unknown> }> = [];
    const sub = fx.nats.connection.subscribe(`${fx.prefix}.cmd.ledger.>`, {
      callback: (_err, msg) => {
        seen.push({ subject: msg.subject, body: JSON.parse(decoder.decode(msg.data)) as Record<string, unknown> });
        msg.respond(
          new TextEncoder().encode(JSON.stringify({ ok: false, error: { code: 'handoff_not_pending', kind: 'wrong_state', message: 'decided already' } })),
        );
      },
    });
    await fx.nats.connection.flush();
    try {
      const refused = await post('/v1/projects/beta/handoffs/hb-ho-twice/decision', both, { decision: 'accept', idempotency_key: 'k-beta' });
      expect(refused.json().error?.code).toBe('handoff_not_pending');
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.every((s) => s.subject.startsWith(`${fx.prefix}.cmd.ledger.beta.`))).toBe(true);
      expect(seen[0]!.body).toMatchObject({ handoff_id: 'hb-ho-twice', decision: 'accept', idempotency_key: 'k-beta' });
    } finally {
      sub.unsubscribe();
    }
  });

  it("abandons: the id-only route refuses a shared handoff id 409; the project route sends the ledger's abandon on that project's subject as the token's operator", async () => {
    const seen: Array<{ subject: string; body: Record<string, unknown> }> = [];
    const sub = fx.nats.connection.subscribe(`${fx.prefix}.cmd.ledger.>`, {
      callback: (_err, msg) => {
        seen.push({ subject: msg.subject, body: JSON.parse(decoder.decode(msg.data)) as Record<string, unknown> });
        msg.respond(
          new TextEncoder().encode(JSON.stringify({ ok: false, error: { code: 'handoff_not_open', kind: 'wrong_state', message: 'ended already' } })),
        );
      },
    });
    await fx.nats.connection.flush();
    try {
      const ambiguous = await post('/v1/handoffs/ho-same/abandon', both, { reason: 'duplicate' });
      expect(ambiguous.status).toBe(409);
      expect(ambiguous.json().error).toMatchObject({ code: 'ambiguous_id', details: { projects: ['alpha', 'beta'] } });
      expect(seen).toEqual([]);

      // A body may repeat the token's name as its actor (another name is 403 identity_mismatch: operator-identity.int-spec.ts).
      const refused = await post('/v1/projects/beta/handoffs/ho-same/abandon', both, { reason: '  duplicate  ', idempotency_key: 'k-ab', actor: 'olga' });
      expect(refused.status).toBe(409);
      expect(refused.json().error).toMatchObject({ code: 'handoff_not_open', details: { outcome: 'refused', handoff_id: 'ho-same', project: 'beta' } });
      expect(seen.length).toBeGreaterThan(0);
      expect(seen[0]).toEqual({
        subject: `${fx.prefix}.cmd.ledger.beta.op.notifier.abandon`,
        body: { handoff_id: 'ho-same', reason: 'duplicate', idempotency_key: 'k-ab', actor: 'olga', actor_role: 'operator' },
      });
    } finally {
      sub.unsubscribe();
    }
  });

  it("a person's text is refused 400 schema_violation when it holds control characters or nothing visible, and a cap past the safe integers too: nothing is sent", async () => {
    const before = { alpha: (await answersOn('alpha')).length, beta: (await answersOn('beta')).length };
    const blank = await post('/v1/projects/beta/handoffs/ho-same/abandon', both, { reason: '\u0000\u0001' });
    expect(blank.status).toBe(400);
    expect(blank.json().error).toMatchObject({ code: 'schema_violation', issues: expect.arrayContaining([expect.objectContaining({ path: 'reason' })]) });
    const invisible = await post('/v1/projects/beta/handoffs/ho-same/abandon', both, { reason: '\u200b\u202e ' });
    expect(invisible.status).toBe(400);
    const note = await post('/v1/projects/alpha/stops/stop-same/answer', both, { action: 'deny', note: 'ok\u001b[2J' });
    expect(note.status).toBe(400);
    expect(note.json().error).toMatchObject({ code: 'schema_violation', issues: [expect.objectContaining({ path: 'note' })] });
    const cap = await post('/v1/projects/beta/stops/stop-same/answer', both, { action: 'raise_cap', cap: 1e308 });
    expect(cap.status).toBe(400);
    expect(cap.json().error).toMatchObject({ code: 'schema_violation', issues: [expect.objectContaining({ path: 'cap' })] });
    expect({ alpha: (await answersOn('alpha')).length, beta: (await answersOn('beta')).length }).toEqual(before);
  });

  it('no ledger answers: the abandon is answered 503 with the idempotency key it was sent with (generated when the request had none) and Retry-After, so the same command can be retried safely', async () => {
    // No ledger serves this fixture's prefix: the request finds no responder (kind unavailable).
    const first = await post('/v1/projects/beta/handoffs/ho-same/abandon', both, { reason: 'duplicate' });
    expect(first.status).toBe(503);
    expect(first.headers.get('retry-after')).toBe('2');
    const error = first.json().error as { code: string; details: { idempotency_key?: string; retry_after_sec?: number } };
    expect(error.details.idempotency_key).toMatch(/^abandon-[0-9a-f-]{36}$/);
    expect(error.details.retry_after_sec).toBe(2);
    const seen: Array<Record<string, unknown>> = [];
    const sub = fx.nats.connection.subscribe(`${fx.prefix}.cmd.ledger.>`, {
      callback: (_err, msg) => {
        seen.push(JSON.parse(decoder.decode(msg.data)) as Record<string, unknown>);
        msg.respond(
          new TextEncoder().encode(JSON.stringify({ ok: false, error: { code: 'handoff_not_open', kind: 'wrong_state', message: 'ended already' } })),
        );
      },
    });
    await fx.nats.connection.flush();
    try {
      const retried = await post('/v1/projects/beta/handoffs/ho-same/abandon', both, { reason: 'duplicate', idempotency_key: error.details.idempotency_key });
      expect(retried.status).toBe(409);
      expect(seen[0]).toMatchObject({ idempotency_key: error.details.idempotency_key });
      // A refusal the ledger made is no retry signal: no key, no Retry-After.
      expect(retried.headers.get('retry-after')).toBeNull();
      expect((retried.json().error as { details: object }).details).not.toHaveProperty('retry_after_sec');
    } finally {
      sub.unsubscribe();
    }
  });

  it('web pages: project pages per project, the id-only page redirects when unambiguous and refuses 409 otherwise, cards link to project pages', async () => {
    const cookie = await signIn(both);
    const betaPage = await call('/projects/beta/runs/wr-same', { cookie });
    expect(betaPage.status).toBe(200);
    expect(betaPage.text).toContain('<dt>Project</dt><dd>beta</dd>');
    expect(betaPage.text).toContain('href="/projects/beta/handoffs/ho-same"');
    const handoffPage = await call('/projects/beta/handoffs/ho-same', { cookie });
    expect(handoffPage.text).toContain('href="/projects/beta/runs/wr-same"');
    const shared = await call('/runs/wr-same', { cookie });
    expect(shared.status).toBe(409);
    expect(shared.text).toContain('ambiguous_id');
    // It points to the web pages of the record in each project, not to the API's routes.
    expect(shared.text).toContain('/projects/alpha/runs/wr-same');
    expect(shared.text).toContain('/projects/beta/runs/wr-same');
    expect(shared.text).not.toContain('/v1/projects/');
    const single = await call('/runs/wr-alpha-only', { cookie });
    expect(single.status).toBe(303);
    expect(single.headers.get('location')).toBe('/projects/alpha/runs/wr-alpha-only');
    expect((await call('/handoffs/nope', { cookie })).status).toBe(404);

    const card = await call(`/inbox/items/${encodeURIComponent('handback:beta:hb-ho-twice')}?status=any`, { cookie });
    expect(card.status).toBe(200);
    expect(card.text).toContain('action="/inbox/projects/beta/handoffs/hb-ho-twice/decision"');
    expect(card.text).toContain('href="/projects/beta/handoffs/hb-ho-twice"');
    const stopCard = await call(`/inbox/items/${encodeURIComponent('stop:alpha:stop-same')}?status=any`, { cookie });
    expect(stopCard.text).toContain('action="/inbox/projects/alpha/stops/stop-same/answer"');
    expect(stopCard.text).toContain('href="/projects/alpha/runs/wr-same#timeline"');

    const alphaCookie = await signIn(alphaOnly);
    expect((await call('/projects/beta/runs/wr-same', { cookie: alphaCookie })).status).toBe(404);
    expect((await call('/projects/beta/handoffs/ho-same', { cookie: alphaCookie })).status).toBe(404);
    expect((await call(`/inbox/items/${encodeURIComponent('stop:beta:stop-same')}?status=any`, { cookie: alphaCookie })).status).toBe(404);
  });
});
