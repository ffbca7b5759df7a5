import { Subjects } from '@baton/contracts';
import { InboxWhys } from '@baton/projections';
import { batonStreamNames } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
// The real ledger in-process, so the Withdraw form's abandon is decided (test-only cross-app import, as the router's suites do).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startLedger } from '../../../ledger/src/ledger';
import { answerStop, createHandoff, handbackCycle, holdRun, startFixture, startRun, stopRun, type NotifierFixture } from './console-fixture.int-support';

/** A script-injection payload naming the field it is put in. */
const xss = (field: string) => `<script>alert(1)</script><img src=x onerror=alert('${field}')>`;
const escaped = (field: string) => `&lt;img src&#61;x onerror&#61;alert(&#39;${field}&#39;)&gt;`;
const decoder = new TextDecoder();

let fx: NotifierFixture;
let alphaOperator: string;
let alphaViewer: string;
let admin: string;

interface Reply {
  status: number;
  headers: Headers;
  text: string;
  json: () => Record<string, unknown> & { error?: { code: string }; items?: Array<Record<string, unknown>> };
}

async function call(path: string, init: RequestInit & { token?: string; cookie?: string } = {}): Promise<Reply> {
  const headers = new Headers(init.headers);
  if (init.token) headers.set('authorization', `Bearer ${init.token}`);
  if (init.cookie) headers.set('cookie', init.cookie);
  const response = await fetch(`${fx.base}${path}`, { ...init, headers, redirect: 'manual' });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, json: () => JSON.parse(text) };
}

const form = (fields: Record<string, string>) => ({
  method: 'POST',
  headers: { 'content-type': 'application/x-www-form-urlencoded' },
  body: new URLSearchParams(fields).toString(),
});

/** Sign in through the login page as a browser would; returns the session cookie and the page's CSRF token. */
async function signIn(token: string): Promise<{ cookie: string; csrf: string }> {
  const page = await call('/login');
  const loginCsrf = /name="_csrf" value="([^"]+)"/.exec(page.text)![1]!;
  const loginCookie = page.headers.get('set-cookie')!.split(';')[0]!;
  const done = await call('/login', { ...form({ _csrf: loginCsrf, token, next: '/inbox' }), cookie: loginCookie });
  expect(done.status).toBe(303);
  const cookie = done.headers
    .getSetCookie()
    .find((c) => c.startsWith('baton_session='))!
    .split(';')[0]!;
  const inbox = await call('/inbox', { cookie });
  return { cookie, csrf: /name="_csrf" value="([^"]+)"/.exec(inbox.text)![1]! };
}

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

describe('operator console: tokens, roles, project scoping, web inbox (real NATS, Redis and HTTP)', () => {
  beforeAll(async () => {
    fx = await startFixture();
    alphaOperator = await fx.token('olga', 'operator', ['alpha']);
    alphaViewer = await fx.token('vera', 'viewer', ['alpha']);
    admin = await fx.token('ada', 'admin', '*');
    // alpha: a policy stop with a frozen call, an unknown-intent stop, a budget stop, a hold, a handback — every agent-written field an injection payload.
    await startRun(fx.events, 'alpha', 'wr-pol');
    await stopRun(fx.events, 'alpha', 'wr-pol', {
      packet_id: 'stop-pol',
      why: 'policy',
      detail: xss('detail'),
      tried: [{ name: xss('tried'), trace_id: xss('trace') }],
      pending: { name: xss('pending-name'), args: { amount: 40, note: xss('pending-arg') } },
    });
    await startRun(fx.events, 'alpha', 'wr-int');
    await stopRun(fx.events, 'alpha', 'wr-int', { packet_id: 'stop-int', why: 'unknown_intent', tried: [] });
    await startRun(fx.events, 'alpha', 'wr-cap');
    await stopRun(fx.events, 'alpha', 'wr-cap', { packet_id: 'stop-cap', why: 'budget', tried: ['search'], cap: { name: 'tool_calls', limit: 8, used: 8 } });
    await startRun(fx.events, 'alpha', 'wr-done');
    await stopRun(fx.events, 'alpha', 'wr-done', { packet_id: 'stop-done', why: 'policy', tried: [], pending: { name: 'refund', args: { amount: 5 } } });
    await answerStop(fx.events, 'alpha', 'wr-done', 'stop-done');
    await startRun(fx.events, 'alpha', 'wr-hold');
    await holdRun(fx.events, 'alpha', 'wr-hold', xss('hold-reason'));
    await handbackCycle(fx.events, 'alpha', 'ho-1', xss('summary'), xss('report'));
    // beta: another project's stop.
    await startRun(fx.events, 'beta', 'wr-beta');
    await stopRun(fx.events, 'beta', 'wr-beta', { packet_id: 'stop-beta', why: 'policy', tried: [], pending: { name: 'refund', args: { amount: 9000 } } });
    await fx.caughtUp();
  });

  afterAll(async () => {
    await fx?.close();
  });

  it('auth is on: the API answers 401 without a token, with a malformed or unknown one, and after revocation', async () => {
    expect((await call('/v1/inbox')).status).toBe(401);
    expect((await call('/v1/inbox')).json().error?.code).toBe('unauthenticated');
    expect((await call('/v1/inbox', { token: 'not-a-token' })).status).toBe(401);
    expect((await call('/v1/inbox', { token: `bt_${'0'.repeat(16)}_${'A'.repeat(43)}` })).status).toBe(401);
    const tampered = alphaOperator.slice(0, -1) + (alphaOperator.endsWith('A') ? 'B' : 'A');
    expect((await call('/v1/inbox', { token: tampered })).status).toBe(401);
    const doomed = await fx.token('temp', 'operator', ['alpha']);
    expect((await call('/v1/inbox', { token: doomed })).status).toBe(200);
    const session = await signIn(doomed);
    expect((await call('/v1/inbox', { cookie: session.cookie })).status).toBe(200);
    const [, id] = /^bt_([0-9a-f]{16})_/.exec(doomed)!;
    await fx.tokens.revoke(id!, new Date().toISOString());
    expect((await call('/v1/inbox', { token: doomed })).status).toBe(401);
    // A browser whose session ended is told to sign in again, not to send a bearer token.
    const ended = await call('/v1/inbox', { cookie: session.cookie });
    expect({ status: ended.status, error: ended.json().error }).toMatchObject({
      status: 401,
      error: { code: 'unauthenticated', message: expect.stringContaining('sign in again at /login') },
    });
    // Stored hashed: the record holds neither the token nor its secret.
    const raw = await fx.redis.client.get(`${fx.prefix}:auth:token:${id}`);
    expect(raw).not.toContain(doomed.split('_').slice(2).join('_'));
    expect(JSON.parse(raw!)).toMatchObject({ hash: expect.stringMatching(/^[0-9a-f]{64}$/), salt: expect.stringMatching(/^[0-9a-f]{32}$/) });
  });

  it('project scoping: an operator of project alpha can neither see nor answer project beta items', async () => {
    const inbox = await call('/v1/inbox?status=any&limit=500', { token: alphaOperator });
    const projects = new Set(inbox.json().items!.map((i) => i['project']));
    expect([...projects]).toEqual(['alpha']);
    expect((await call('/v1/inbox?status=any&limit=500', { token: admin })).json().items!.map((i) => i['id'])).toContain('stop:beta:stop-beta');
    // `all` is `any`, as the CLI's --status takes it: the same items, for the inbox and the stops.
    const ids = async (path: string) =>
      (await call(path, { token: admin })).json().items!.map((i) => i['id'] ?? (i['stop'] as { packet_id: string }).packet_id);
    expect(await ids('/v1/inbox?status=all&limit=500')).toEqual(await ids('/v1/inbox?status=any&limit=500'));
    expect(await ids('/v1/stops?status=all')).toEqual(await ids('/v1/stops?status=any'));
    expect(await ids('/v1/stops?status=all')).toContain('stop-beta');
    expect((await call('/v1/inbox?project=beta', { token: alphaOperator })).json().error?.code).toBe('project_forbidden');
    expect((await call('/v1/stops?project=alpha,beta', { token: alphaOperator })).status).toBe(403);
    expect((await call('/v1/stops', { token: alphaOperator })).json().items!.map((r) => (r['stop'] as { project: string }).project)).not.toContain('beta');
    for (const path of ['/v1/stops/stop-beta', '/v1/runs/wr-beta']) {
      const reply = await call(path, { token: alphaOperator });
      expect({ path, status: reply.status, code: reply.json().error?.code }).toEqual({ path, status: 404, code: 'not_found' });
    }
    const answer = await call('/v1/stops/stop-beta/answer', {
      method: 'POST',
      token: alphaOperator,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ action: 'deny' }),
    });
    expect(answer.status).toBe(404);
    expect(await answersOn('beta')).toEqual([]);
    // Its own project's packet it reads.
    expect((await call('/v1/stops/stop-pol', { token: alphaOperator })).status).toBe(200);
  });

  it('a viewer reads but cannot answer: 403 role_forbidden and nothing is published', async () => {
    expect((await call('/v1/stops/stop-int', { token: alphaViewer })).status).toBe(200);
    const refused = await call('/v1/stops/stop-int/answer', {
      method: 'POST',
      token: alphaViewer,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ action: 'intent', intent: 'billing' }),
    });
    expect({ status: refused.status, code: refused.json().error?.code }).toEqual({ status: 403, code: 'role_forbidden' });
    // The role is checked before the body: a viewer's malformed answer is 403 too, not a 400 about the body.
    const malformed = await call('/v1/stops/stop-int/answer', {
      method: 'POST',
      token: alphaViewer,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ action: 'raise_cap', cap: 'lots', pending_digest: 7 }),
    });
    expect({ status: malformed.status, code: malformed.json().error?.code }).toEqual({ status: 403, code: 'role_forbidden' });
    expect((await answersOn('alpha')).filter((a) => JSON.stringify(a).includes('stop-int'))).toEqual([]);
  });

  it("a packet's pending_digest echoed back as it is shown (null: no frozen call) is no digest, not a schema violation", async () => {
    const packet = (await call('/v1/stops/stop-cap', { token: alphaOperator })).json() as { stop: { pending_digest: string | null } };
    expect(packet.stop.pending_digest).toBeNull();
    const reply = await call('/v1/stops/stop-cap/answer', {
      method: 'POST',
      token: alphaOperator,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ answer_id: 'ans-cap-null', action: 'raise_cap', cap: 20, pending_digest: packet.stop.pending_digest }),
    });
    expect(reply.status).toBe(202); // no router here: published, not decided (pending)
    const published = (await answersOn('alpha')).find((a) => JSON.stringify(a).includes('ans-cap-null')) as { answer: { answer: Record<string, unknown> } };
    expect(published.answer.answer).toMatchObject({ action: 'raise_cap', cap: 20 });
    expect(published.answer.answer).not.toHaveProperty('pending_digest');
  });

  it("the answer's answered_by and actor_role come from the authenticated token, never from the body: a body naming another is 403 identity_mismatch", async () => {
    const send = (answeredBy: string) =>
      call('/v1/stops/stop-int/answer', {
        method: 'POST',
        token: alphaOperator,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ answer_id: 'ans-api-int', action: 'intent', intent: 'billing', answered_by: answeredBy }),
      });
    const claimed = await send('mallory');
    expect({ status: claimed.status, error: claimed.json().error }).toMatchObject({
      status: 403,
      error: { code: 'identity_mismatch', details: { field: 'answered_by', actor: 'olga' } },
    });
    expect(JSON.stringify(await answersOn('alpha'))).not.toContain('ans-api-int');
    // The token's own name may be repeated.
    const reply = await send('olga');
    expect(reply.status).toBe(202); // no router here: published, not decided (pending)
    const published = (await answersOn('alpha')).find((a) => JSON.stringify(a).includes('ans-api-int'));
    expect(published).toMatchObject({
      actor_role: 'operator',
      answer: { kind: 'stop_answer', answer: { answer_id: 'ans-api-int', answered_by: 'olga', intent: 'billing' } },
    });
    expect(JSON.stringify(published)).not.toContain('mallory');
  });

  it('web pages need a session: /inbox redirects to /login; sign-in needs its CSRF pair and a valid token; the cookie is HttpOnly and SameSite=Strict', async () => {
    const anonymous = await call('/inbox');
    expect(anonymous.status).toBe(303);
    expect(anonymous.headers.get('location')).toBe('/login?next=%2Finbox');
    // A bearer token does not open pages; the JSON API it does.
    expect((await call('/inbox', { token: alphaOperator })).status).toBe(303);
    const page = await call('/login');
    const csrf = /name="_csrf" value="([^"]+)"/.exec(page.text)![1]!;
    const loginCookie = page.headers.get('set-cookie')!;
    expect(loginCookie).toMatch(/HttpOnly/);
    expect(loginCookie).toMatch(/SameSite=Strict/);
    // Without the double-submit cookie (a cross-site login attempt) → refused.
    expect((await call('/login', form({ _csrf: csrf, token: alphaOperator }))).status).toBe(403);
    const cookie = loginCookie.split(';')[0]!;
    const bad = await call('/login', { ...form({ _csrf: csrf, token: 'bt_nope' }), cookie });
    expect(bad.status).toBe(401);
    expect(bad.text).toContain('That token is not valid');
    const ok = await call('/login', { ...form({ _csrf: csrf, token: alphaOperator, next: '//evil.example/x' }), cookie });
    expect(ok.status).toBe(303);
    expect(ok.headers.get('location')).toBe('/inbox');
    const session = ok.headers.getSetCookie().find((c) => c.startsWith('baton_session='))!;
    expect(session).toMatch(/HttpOnly/);
    expect(session).toMatch(/SameSite=Strict/);
    const inbox = await call('/inbox', { cookie: session.split(';')[0]! });
    expect(inbox.status).toBe(200);
    expect(inbox.text).toContain('olga · operator · projects alpha');
  });

  it('a cursor the inbox page did not issue, or a filter given twice, is a 400 page naming it, as the API answers it (they were a 500 and a dropped filter)', async () => {
    const { cookie } = await signIn(alphaOperator);
    const repeated = await call('/inbox?status=open&status=closed', { cookie });
    expect(repeated.status).toBe(400);
    expect(repeated.text).toContain('status: give it once');
    for (const cursor of ['garbage', Buffer.from('{"v":9}').toString('base64url')]) {
      const page = await call(`/inbox?cursor=${cursor}`, { cookie });
      expect({ cursor, status: page.status }).toEqual({ cursor, status: 400 });
      expect(page.text).toContain('schema_violation');
      expect(page.text).toContain('cursor');
    }
  });

  it('agent-produced text is escaped in every page: script-injection payloads in every field appear as text, never as markup', async () => {
    const { cookie } = await signIn(admin);
    const pages = {
      inbox: await call('/inbox?status=any', { cookie }),
      run: await call('/projects/alpha/runs/wr-pol', { cookie }),
      hold: await call('/projects/alpha/runs/wr-hold', { cookie }),
      handoff: await call('/projects/alpha/handoffs/ho-1', { cookie }),
      handback: await call(`/projects/alpha/handoffs/${encodeURIComponent('hb-ho-1')}`, { cookie }),
      fragment: await call(`/inbox/items/${encodeURIComponent('stop:alpha:stop-pol')}`, { cookie }),
    };
    for (const [name, reply] of Object.entries(pages)) {
      expect({ name, status: reply.status }).toEqual({ name, status: 200 });
      expect({ name, raw: /<script>alert|<img src=x|onerror=/.test(reply.text) }).toEqual({ name, raw: false });
    }
    expect(pages.inbox.headers.get('content-security-policy')).toContain("script-src 'self'");
    for (const field of ['detail', 'tried', 'trace', 'pending-name', 'pending-arg', 'hold-reason', 'report']) {
      expect({ field, shown: pages.inbox.text.includes(escaped(field)) }).toEqual({ field, shown: true });
    }
    for (const field of ['tried', 'pending-name']) expect({ field, shown: pages.run.text.includes(escaped(field)) }).toEqual({ field, shown: true });
    expect(pages.handoff.text).toContain(escaped('summary'));
    expect(pages.fragment.text).toContain(escaped('detail'));
  });

  it('each item renders its next form as a real form: approve / deny; type the intent; raise the cap; accept / rework a handback with a note', async () => {
    const { cookie } = await signIn(alphaOperator);
    const card = async (id: string) => (await call(`/inbox/items/${encodeURIComponent(id)}`, { cookie })).text;
    const buttons = (html: string) => [...html.matchAll(/<button class="btn[^"]*" type="submit" name="(action|decision)" value="([a-z_]+)"/g)].map((m) => m[2]);
    const policy = await card('stop:alpha:stop-pol');
    expect(buttons(policy)).toEqual(['approve', 'deny']);
    expect(policy).toMatch(/name="pending_digest" value="[a-z0-9]+:[0-9a-f]+"/);
    expect(policy).toContain('name="_csrf"');
    expect(policy).toContain('href="/projects/alpha/runs/wr-pol#timeline"');
    const cap = await card('stop:alpha:stop-cap');
    expect(buttons(cap)).toEqual(['raise_cap', 'deny']);
    expect(cap).toMatch(/type="number" step="any" name="cap"/);
    // The limits the answer is held to are shown under the field (a run's cap: above the current one, no upper bound).
    expect(cap).toContain('data-testid="field-limits">above 8</div>');
    // A note may be as long as the answer's schema takes (ShortTextSchema: 4 000 characters).
    expect(cap).toContain('<textarea name="note" maxlength="4000">');
    expect(cap).not.toMatch(/name="cap"[^>]* max=/);
    expect(buttons(await card('stop:alpha:stop-int'))).toEqual(['intent', 'deny']);
    expect(await card('stop:alpha:stop-int')).toMatch(/<input name="intent"/);
    const handback = await card('handback:alpha:hb-ho-1');
    expect(buttons(handback)).toEqual(['accept', 'rework']);
    expect(handback).toContain('<textarea name="note"');
    const holdId = String((await call('/v1/inbox?kind=hold', { token: alphaOperator })).json().items![0]!['id']);
    expect(holdId).toMatch(/^hold:\d+:alpha:wr-hold$/);
    const holdCard = await card(holdId);
    expect(buttons(holdCard)).toEqual(['continue', 'reroute', 'terminate']);
    // The hold form names the hold it answers (its cause): a newer hold refuses it (stale_answer).
    expect(holdCard).toContain('<input type="hidden" name="hold_cause_kind" value="result">');
    expect(holdCard).toContain('<input type="hidden" name="hold_cause_id" value="res-wr-hold">');
    // A viewer sees the item but no form.
    const viewer = await signIn(alphaViewer);
    const readOnly = (await call(`/inbox/items/${encodeURIComponent('stop:alpha:stop-pol')}`, { cookie: viewer.cookie })).text;
    expect(buttons(readOnly)).toEqual([]);
    expect(readOnly).toContain('Read only');
  });

  it('every form post needs the session CSRF token: without it, with another one, or from another origin it is refused 403 and nothing is published', async () => {
    const { cookie, csrf } = await signIn(alphaOperator);
    const other = await signIn(alphaOperator);
    const before = (await answersOn('alpha')).length;
    const fields = { answer_id: 'web-csrf-1', action: 'deny', note: 'x' };
    expect((await call('/inbox/stops/stop-cap/answer', { ...form(fields), cookie })).status).toBe(403);
    expect((await call('/inbox/stops/stop-cap/answer', { ...form({ ...fields, _csrf: other.csrf }), cookie })).status).toBe(403);
    const crossSite = await call('/inbox/stops/stop-cap/answer', {
      ...form({ ...fields, _csrf: csrf }),
      cookie,
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://evil.example' },
    });
    expect(crossSite.status).toBe(403);
    expect(crossSite.text).toContain('csrf_failed');
    expect((await call('/inbox/stops/stop-cap/answer', { ...form({ ...fields, _csrf: csrf }) })).status).toBe(401);
    expect((await answersOn('alpha')).length).toBe(before);
  });

  it('the raise form reads its cap as the API reads a form cap: decimal text only; the cap field another action posts along is not read', async () => {
    const { cookie, csrf } = await signIn(alphaOperator);
    const before = (await answersOn('alpha')).length;
    for (const cap of ['0x10', '', 'Infinity', '12abc']) {
      const refused = await call('/inbox/stops/stop-cap/answer', { ...form({ _csrf: csrf, answer_id: `web-cap-${cap}`, action: 'raise_cap', cap }), cookie });
      expect({ cap, status: refused.status, code: refused.text.includes('schema_violation') }).toEqual({ cap, status: 400, code: true });
    }
    expect((await answersOn('alpha')).length).toBe(before);
    const raised = await call('/inbox/stops/stop-cap/answer', {
      ...form({ _csrf: csrf, answer_id: 'web-cap-ok', action: 'raise_cap', cap: ' 1.2e1 ' }),
      cookie,
    });
    expect(raised.status).toBe(303);
    const sent = (await answersOn('alpha')).slice(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ answer: { answer: { answer_id: 'web-cap-ok', action: 'raise_cap', cap: 12 } } });
  });

  it('a blank intent is refused by the form as by the API: 400 answer_incomplete, nothing published', async () => {
    const { cookie, csrf } = await signIn(alphaOperator);
    const before = (await answersOn('alpha')).length;
    const web = await call('/inbox/stops/stop-int/answer', {
      ...form({ _csrf: csrf, answer_id: 'web-blank-intent', action: 'intent', intent: '   ' }),
      cookie,
    });
    const api = await call('/v1/stops/stop-int/answer', {
      method: 'POST',
      token: alphaOperator,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ answer_id: 'api-blank-intent', action: 'intent', intent: '   ' }),
    });
    expect({ web: web.status, webCode: web.text.includes('answer_incomplete') }).toEqual({ web: 400, webCode: true });
    expect({ api: api.status, apiCode: api.json().error?.code }).toEqual({ api: 400, apiCode: 'answer_incomplete' });
    expect((await answersOn('alpha')).length).toBe(before);
  });

  it('a stale or mismatched answer is refused fail-closed and shown: the pending call is not the one the form rendered, or the packet was already answered', async () => {
    const { cookie, csrf } = await signIn(alphaOperator);
    const before = (await answersOn('alpha')).length;
    const stale = await call('/inbox/stops/stop-pol/answer', {
      ...form({ _csrf: csrf, answer_id: 'web-stale-1', action: 'approve', pending_digest: 'sha256:not-the-call-you-saw' }),
      cookie,
    });
    expect(stale.status).toBe(409);
    expect(stale.text).toContain('stale_answer');
    expect(stale.text).toContain('role="alert"');
    const answered = await call('/inbox/stops/stop-done/answer', { ...form({ _csrf: csrf, answer_id: 'web-late-1', action: 'deny' }), cookie });
    expect(answered.status).toBe(409);
    expect(answered.text).toContain('stop_already_answered');
    expect((await answersOn('alpha')).length).toBe(before);
  });

  it('the inbox page takes a page size (limit, 1–500 as the API takes it); a later page keeps its cursor and size in what the live script reconciles, so page 2 stays page 2; the heading says how many are shown', async () => {
    const { cookie } = await signIn(admin);
    const articles = (html: string) => [...html.matchAll(/<article class="item" data-item-id="([^"]+)"/g)].map((m) => m[1]);
    const dataQuery = (html: string) => /<section id="items"[^>]* data-query="([^"]*)">/.exec(html)![1]!.replace(/&#61;/g, '=').replace(/&amp;/g, '&');
    const first = await call('/inbox?status=any&limit=2', { cookie });
    expect(first.status).toBe(200);
    expect(articles(first.text)).toHaveLength(2);
    expect(first.text).toMatch(
      /\(<span id="open-count" data-testid="open-count">\d+<\/span> open; <span id="item-count">2<\/span> shown<span id="more-note">; more on the next page<\/span>\)/,
    );
    expect(dataQuery(first.text)).toBe('?status=any&limit=2');
    const more = /<a href="([^"]+)" data-testid="more">/.exec(first.text)![1]!.replace(/&#61;/g, '=').replace(/&amp;/g, '&');
    expect(more).toMatch(/^\/inbox\?status=any&limit=2&cursor=[A-Za-z0-9_-]+$/);
    const second = await call(more, { cookie });
    const onSecond = articles(second.text);
    expect(onSecond).toHaveLength(2);
    expect(onSecond.filter((id) => articles(first.text).includes(id))).toEqual([]);
    expect(second.text).toContain('shown on this page');
    expect(second.text).toContain('<a href="/inbox?status&#61;any&amp;limit&#61;2" data-testid="first-page">');
    // What the live script reconciles page 2 with is page 2 (it was page 1: the cursor was dropped).
    const query = dataQuery(second.text);
    expect(query).toBe(more.slice('/inbox'.length));
    const ids = (await call(`/inbox/ids${query}`, { cookie })).json().items!.map((i) => i['id']);
    expect(ids).toEqual(onSecond);
    expect((await call('/inbox/ids?status=any&limit=3', { cookie })).json().items).toHaveLength(3);
    // A size the API refuses is refused here too, in words, its code kept (it was ignored: 50 items).
    for (const limit of ['0', '501', 'ten', '2.5']) {
      const refused = await call(`/inbox?limit=${limit}`, { cookie });
      expect({ limit, status: refused.status }).toEqual({ limit, status: 400 });
      expect(refused.text).toContain('<strong>schema_violation</strong>: The page size (limit) is a whole number from 1 to 500, in digits.');
    }
  });

  it('refusals are said in plain words with their stable code: a why the filter does not take, a Route with no kind of request, a cap that is no raise', async () => {
    const { cookie, csrf } = await signIn(alphaOperator);
    const bogus = await call('/inbox?why=bogus', { cookie });
    expect(bogus.status).toBe(400);
    expect(bogus.text).toContain(`<strong>schema_violation</strong>: The why filter takes one of: ${InboxWhys.join(', ')}.`);
    // zod's own text stays under Details, not in the sentence.
    expect(bogus.text).toMatch(/<code data-testid="refusal-detail">why\.0: Invalid option/);
    const before = (await answersOn('alpha')).length;
    const noKind = await call('/inbox/projects/alpha/stops/stop-int/answer', {
      ...form({ _csrf: csrf, answer_id: 'web-no-kind', action: 'intent', intent: '' }),
      cookie,
    });
    expect(noKind.status).toBe(400);
    expect(noKind.text).toContain('<strong>schema_violation</strong>: Type the kind of request before pressing Route.');
    expect(noKind.text).not.toMatch(/schema_violation<\/strong>: intent: Too small/);
    for (const cap of ['-1', '0', 'ten']) {
      const low = await call('/inbox/projects/alpha/stops/stop-cap/answer', {
        ...form({ _csrf: csrf, answer_id: `web-low-cap-${cap}`, action: 'raise_cap', cap }),
        cookie,
      });
      expect({ cap, status: low.status }).toEqual({ cap, status: 400 });
      expect(low.text).toContain('<strong>schema_violation</strong>: The new cap must be a number above 8.');
    }
    // Through the id-only route the packet's form is not read: the words say it in general.
    const idOnly = await call('/inbox/stops/stop-cap/answer', {
      ...form({ _csrf: csrf, answer_id: 'web-low-cap-id', action: 'raise_cap', cap: '-1' }),
      cookie,
    });
    expect(idOnly.text).toContain('The new cap must be a number above the current cap.');
    expect((await answersOn('alpha')).length).toBe(before);
  });

  it('a form posted after its session ended (signed out) is refused 401 with a link to sign in again that comes back to where the form was', async () => {
    const { cookie, csrf } = await signIn(alphaOperator);
    expect((await call('/logout', { ...form({ _csrf: csrf }), cookie })).status).toBe(303);
    const refused = await call('/inbox/projects/alpha/stops/stop-cap/answer', {
      ...form({ _csrf: csrf, answer_id: 'web-after-logout', action: 'deny', note: 'typed before', return: '/inbox?why=budget' }),
      cookie,
    });
    expect(refused.status).toBe(401);
    expect(refused.text).toContain('<strong>unauthenticated</strong>');
    const link = /<a class="btn primary" href="([^"]+)" data-testid="sign-in">Sign in again<\/a>/.exec(refused.text)![1]!;
    expect(link).toBe('/login?next=%2Finbox%3Fwhy%3Dbudget');
    expect((await call(link)).text).toContain('<input type="hidden" name="next" value="/inbox?why&#61;budget">');
  });

  it('submitting the form resumes the run through the platform: the answer is published with the rendered digest and the token as who answered', async () => {
    const { cookie, csrf } = await signIn(alphaOperator);
    const card = (await call(`/inbox/items/${encodeURIComponent('stop:alpha:stop-pol')}`, { cookie })).text;
    const digest = /name="pending_digest" value="([^"]+)"/.exec(card)![1]!;
    const answerId = /name="answer_id" value="([^"]+)"/.exec(card)![1]!;
    const sent = await call('/inbox/stops/stop-pol/answer', {
      ...form({ _csrf: csrf, answer_id: answerId, action: 'approve', pending_digest: digest, note: 'ok', return: '/inbox?status=open' }),
      cookie,
    });
    expect(sent.status).toBe(303);
    const location = sent.headers.get('location')!;
    expect(location).toMatch(new RegExp(`^/inbox\\?status=open&sent=${encodeURIComponent('stop:alpha:stop-pol')}&outcome=pending&sig=[A-Za-z0-9_-]{22}$`));
    // No router decides it here, so the page says it was sent, not applied.
    const landed = await call(location, { cookie });
    expect(landed.text).toMatch(/data-outcome="pending"[^>]*>Answer to stop:alpha:stop-pol sent; not applied yet/);
    // A link of anyone's making cannot put a message of its own in that banner…
    const spoofed = await call(`/inbox?sent=${encodeURIComponent('your refund of $5,000 — call +1 555 0100 to confirm')}&outcome=applied`, { cookie });
    expect(spoofed.status).toBe(200);
    expect(spoofed.text).not.toContain('data-testid="sent"');
    // …nor claim an outcome: the banner is signed for this session, this record and this outcome.
    for (const forged of [
      `/inbox?sent=${encodeURIComponent('stop:alpha:stop-int')}&outcome=applied`,
      location.replace('outcome=pending', 'outcome=applied'),
      location.replace(encodeURIComponent('stop:alpha:stop-pol'), encodeURIComponent('stop:alpha:stop-int')),
    ]) {
      expect((await call(forged, { cookie })).text).not.toContain('data-testid="sent"');
    }
    const otherSession = await signIn(alphaOperator);
    expect((await call(location, { cookie: otherSession.cookie })).text).not.toContain('data-testid="sent"');
    const published = (await answersOn('alpha')).find((a) => JSON.stringify(a).includes(answerId));
    expect(published).toMatchObject({
      workflow_run_id: 'wr-pol',
      actor_role: 'operator',
      answer: { answer: { action: 'approve', pending_digest: digest, answered_by: 'olga', note: 'ok' } },
    });
  });

  it('the hold form sends the cause of the hold it was rendered for, so the router can refuse it for a newer hold', async () => {
    const { cookie, csrf } = await signIn(alphaOperator);
    const holdId = String((await call('/v1/inbox?kind=hold', { token: alphaOperator })).json().items![0]!['id']);
    const card = (await call(`/inbox/items/${encodeURIComponent(holdId)}`, { cookie })).text;
    const field = (name: string) => new RegExp(`name="${name}" value="([^"]+)"`).exec(card)![1]!;
    const answerId = field('answer_id');
    const sent = await call('/inbox/projects/alpha/runs/wr-hold/answer', {
      ...form({
        _csrf: csrf,
        answer_id: answerId,
        action: 'terminate',
        hold_cause_kind: field('hold_cause_kind'),
        hold_cause_id: field('hold_cause_id'),
        return: '/inbox',
      }),
      cookie,
    });
    expect(sent.status).toBe(303);
    const published = (await answersOn('alpha')).find((a) => JSON.stringify(a).includes(answerId));
    expect(published).toMatchObject({
      workflow_run_id: 'wr-hold',
      answer: { kind: 'hold_answer', answer: { action: 'terminate', hold_cause: { kind: 'result', id: 'res-wr-hold' } } },
    });
  });

  /** A live stream as a client reads it: its frames as they arrive, and how to end it. */
  async function openStream(path: string, token: string) {
    const controller = new AbortController();
    const response = await fetch(`${fx.base}${path}`, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
    expect(response.headers.get('content-type')).toMatch(/text\/event-stream/);
    const reader = response.body!.getReader();
    let buffer = '';
    const frames: string[] = [];
    const pump = (async () => {
      for (;;) {
        const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
        if (done) return;
        buffer += decoder.decode(value);
        let index;
        while ((index = buffer.indexOf('\n\n')) >= 0) {
          frames.push(buffer.slice(0, index));
          buffer = buffer.slice(index + 2);
        }
      }
    })();
    const close = async () => {
      controller.abort();
      await pump;
    };
    return { frames, close };
  }
  const until = async (predicate: () => boolean) => {
    for (let i = 0; i < 100 && !predicate(); i++) await new Promise((resolve) => setTimeout(resolve, 50));
  };
  const inboxChanges = (frames: string[]) =>
    frames
      .filter((f) => f.includes('event: inbox'))
      .map(
        (f) =>
          JSON.parse(
            f
              .split('\n')
              .find((l) => l.startsWith('data: '))!
              .slice(6),
          ) as { project: string; event_type: string; aggregate: { id: string } },
      );

  it('GET /v1/events/stream pushes inbox changes of the caller projects only, after the projections applied them', async () => {
    const { frames, close } = await openStream('/v1/events/stream', alphaOperator);
    await until(() => frames.some((f) => f.includes('event: ready')));
    await startRun(fx.events, 'beta', 'wr-beta-2');
    await stopRun(fx.events, 'beta', 'wr-beta-2', { packet_id: 'stop-beta-2', why: 'budget', tried: [] });
    await startRun(fx.events, 'alpha', 'wr-live');
    await stopRun(fx.events, 'alpha', 'wr-live', { packet_id: 'stop-live', why: 'budget', tried: [] });
    await until(() => frames.some((f) => f.includes('wr-live')));
    await close();
    const inbox = inboxChanges(frames);
    expect(inbox).toContainEqual(expect.objectContaining({ project: 'alpha', event_type: 'run.stopped', aggregate: { kind: 'run', id: 'wr-live' } }));
    expect(inbox.filter((c) => c.project !== 'alpha')).toEqual([]);
    // When the frame arrives, the item is already readable.
    expect((await call(`/v1/inbox?kind=stop`, { token: alphaOperator })).json().items!.map((i) => i['id'])).toContain('stop:alpha:stop-live');
  });

  it('GET /v1/events/stream?project= narrows the stream to those projects; one the token may not see is 403 project_forbidden, an unknown parameter 400', async () => {
    const { frames, close } = await openStream('/v1/events/stream?project=beta', admin);
    await until(() => frames.some((f) => f.includes('event: ready')));
    await startRun(fx.events, 'alpha', 'wr-narrow-a');
    await stopRun(fx.events, 'alpha', 'wr-narrow-a', { packet_id: 'stop-narrow-a', why: 'budget', tried: [] });
    await startRun(fx.events, 'beta', 'wr-narrow-b');
    await stopRun(fx.events, 'beta', 'wr-narrow-b', { packet_id: 'stop-narrow-b', why: 'budget', tried: [] });
    await until(() => frames.some((f) => f.includes('wr-narrow-b')));
    await close();
    const inbox = inboxChanges(frames);
    expect(inbox).toContainEqual(expect.objectContaining({ project: 'beta', event_type: 'run.stopped', aggregate: { kind: 'run', id: 'wr-narrow-b' } }));
    expect(inbox.filter((c) => c.project !== 'beta')).toEqual([]);

    const forbidden = await call('/v1/events/stream?project=alpha,beta', { token: alphaOperator });
    expect(forbidden.status).toBe(403);
    expect(forbidden.json().error).toMatchObject({ code: 'project_forbidden', details: { projects: ['beta'] } });
    expect((await call('/v1/events/stream?projects=alpha', { token: alphaOperator })).status).toBe(400);
  });

  it('the inbox says how many items are open (open_count), not the size of the page: GET /v1/inbox, the page heading and /inbox/ids, for a token of several projects too', async () => {
    const both = await fx.token('bea', 'viewer', ['alpha', 'beta']);
    const openIds = async (token: string, query = '') => (await call(`/v1/inbox?limit=500${query}`, { token })).json().items!.map((i) => String(i['id']));
    for (const [token, query] of [
      [admin, ''],
      [both, ''],
      [alphaOperator, ''],
      [both, '&kind=stop'],
      [both, '&project=beta'],
    ] as const) {
      const open = await openIds(token, query);
      expect(open.length).toBeGreaterThan(0);
      // A page of one item counts them all; so does a listing of another status (the open items its other filters select).
      const page = (await call(`/v1/inbox?limit=1${query}`, { token })).json();
      expect({ query, items: page.items!.length, open_count: page['open_count'] }).toEqual({ query, items: 1, open_count: open.length });
      expect((await call(`/v1/inbox?limit=1&status=answered${query}`, { token })).json()['open_count']).toBe(open.length);
    }
    // beta's open stops are not alpha's: the count is the token's and the filters'.
    expect((await call('/v1/inbox?limit=1', { token: alphaOperator })).json()['open_count']).toBe((await openIds(alphaOperator)).length);
    expect((await openIds(both)).length).toBeGreaterThan((await openIds(alphaOperator)).length);

    const { cookie } = await signIn(both);
    const page = await call('/inbox?limit=1', { cookie });
    const open = (await openIds(both)).length;
    expect(page.text).toContain(
      `(<span id="open-count" data-testid="open-count">${open}</span> open; <span id="item-count">1</span> shown<span id="more-note">`,
    );
    expect((await call('/inbox/ids?limit=1', { cookie })).json()).toMatchObject({ items: [expect.any(Object)], open_count: open });
    expect((await call('/inbox/ids?limit=1&kind=stop', { cookie })).json()['open_count']).toBe((await openIds(both, '&kind=stop')).length);
  });

  it("signing in again from another tab of the same browser keeps the first tab's forms working (the new session keeps the CSRF token of the browser's session of the same token); another token's sign-in does not, and a form of another browser's session is still refused", async () => {
    // Tab 1 signs in and renders the inbox: its forms carry that session's CSRF token.
    const tab1 = await signIn(alphaOperator);
    // Tab 2 of the same browser signs in again: the browser sends its session cookie along.
    const signInWith = async (browserCookie: string, token: string) => {
      const login = await call('/login', { cookie: browserCookie });
      const loginCsrf = /name="_csrf" value="([^"]+)"/.exec(login.text)![1]!;
      const loginCookie = login.headers.get('set-cookie')!.split(';')[0]!;
      const done = await call('/login', { ...form({ _csrf: loginCsrf, token, next: '/inbox' }), cookie: `${browserCookie}; ${loginCookie}` });
      expect(done.status).toBe(303);
      return done.headers
        .getSetCookie()
        .find((c) => c.startsWith('baton_session='))!
        .split(';')[0]!;
    };
    const browser = await signInWith(tab1.cookie, alphaOperator);
    // A new session (the id is never kept across a sign-in), with the same CSRF token.
    expect(browser).not.toBe(tab1.cookie);
    expect(/name="_csrf" value="([^"]+)"/.exec((await call('/inbox', { cookie: browser })).text)![1]).toBe(tab1.csrf);
    const before = (await answersOn('alpha')).length;
    // Tab 1's form, posted with the cookie the browser holds now: taken (it was 403 csrf_failed).
    const posted = await call('/inbox/stops/stop-cap/answer', {
      ...form({ _csrf: tab1.csrf, answer_id: 'web-tab-1', action: 'deny', note: 'from the first tab', return: '/inbox' }),
      cookie: browser,
    });
    expect(posted.status).toBe(303);
    expect(posted.headers.get('location')).toMatch(/^\/inbox\?sent=stop%3Aalpha%3Astop-cap&outcome=pending&sig=/);
    expect((await answersOn('alpha')).find((a) => JSON.stringify(a).includes('web-tab-1'))).toMatchObject({
      answer: { answer: { action: 'deny', answered_by: 'olga', note: 'from the first tab' } },
    });
    // Another browser's session of the same token has its own token: tab 1's form is no form of it.
    const elsewhere = await signIn(alphaOperator);
    expect(elsewhere.csrf).not.toBe(tab1.csrf);
    expect(
      (await call('/inbox/stops/stop-cap/answer', { ...form({ _csrf: tab1.csrf, answer_id: 'web-tab-2', action: 'deny' }), cookie: elsewhere.cookie })).status,
    ).toBe(403);
    // The same browser signs in as someone else: a new token, so pages rendered for olga never post as ada.
    const switched = await signInWith(browser, admin);
    expect(/name="_csrf" value="([^"]+)"/.exec((await call('/inbox', { cookie: switched })).text)![1]).not.toBe(tab1.csrf);
    const refused = await call('/inbox/stops/stop-cap/answer', { ...form({ _csrf: tab1.csrf, answer_id: 'web-tab-3', action: 'deny' }), cookie: switched });
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('csrf_failed');
    expect((await answersOn('alpha')).length).toBe(before + 1);
  });
});

describe("the handoff page's Withdraw form (real NATS, Redis, HTTP and ledger)", () => {
  let ledger: RunningService | undefined;
  let operator: string;
  let viewer: string;
  let admin: string;
  /** The fields of the page's abandon form (null when the page shows none). */
  const abandonForm = (page: string) => {
    const form = /<form [^>]*data-testid="abandon-form">[\s\S]*?<\/form>/.exec(page)?.[0];
    if (form === undefined) return null;
    const field = (name: string) => new RegExp(`name="${name}" value="([^"]+)"`).exec(form)?.[1];
    return { form, action: /action="([^"]+)"/.exec(form)?.[1], key: field('idempotency_key'), csrf: field('_csrf'), back: field('return') };
  };
  const abandons = async (id: string) => (await fx.events.read({ project: 'alpha', kind: 'handoff', id })).events.filter((e) => e.type === 'handoff.abandoned');

  beforeAll(async () => {
    // A notifier of its own, with a ledger on its prefix to decide the abandon. The suite above has
    // none: a ledger's handoff reactor reads the whole stream and would react again to the
    // handbacks its fixture wrote with their reactions.
    fx = await startFixture();
    ledger = await startLedger({ ...process.env, BATON_PREFIX: fx.prefix, HTTP_PORT: '0', LOG_LEVEL: 'error' });
    operator = await fx.token('olga', 'operator', ['alpha']);
    viewer = await fx.token('vera', 'viewer', ['alpha']);
    admin = await fx.token('ada', 'admin', '*');
    await createHandoff(fx.events, 'alpha', 'ho-w', 'withdraw me');
    await createHandoff(fx.events, 'alpha', 'ho-keep', 'keep me');
    await createHandoff(fx.events, 'beta', 'ho-beta', 'not yours');
    await fx.caughtUp();
  });

  afterAll(async () => {
    await ledger?.stop();
    await fx?.close();
  });

  it('an operator or admin sees Withdraw on an open handoff (reason required, a fresh key per render, back to the page); a viewer sees none', async () => {
    const { cookie } = await signIn(operator);
    const first = abandonForm((await call('/projects/alpha/handoffs/ho-w', { cookie })).text);
    const again = abandonForm((await call('/projects/alpha/handoffs/ho-w', { cookie })).text);
    expect(first).toMatchObject({
      action: '/projects/alpha/handoffs/ho-w/abandon',
      back: '/projects/alpha/handoffs/ho-w',
      key: expect.stringMatching(/^web-/),
    });
    expect(first!.csrf).toBeTruthy();
    // As long as a note may be (ShortTextSchema: 4 000 characters).
    expect(first!.form).toContain('<textarea name="reason" maxlength="4000" required>');
    expect(again!.key).not.toBe(first!.key);
    expect(abandonForm((await call('/projects/alpha/handoffs/ho-w', { cookie: (await signIn(admin)).cookie })).text)).not.toBeNull();
    const read = await call('/projects/alpha/handoffs/ho-w', { cookie: (await signIn(viewer)).cookie });
    expect(read.status).toBe(200);
    expect(read.text).not.toContain('data-testid="abandon-form"');
  });

  it('posting it abandons the handoff through the ledger as the operator; a repost of the key changes nothing; the abandoned handoff offers no form', async () => {
    const { cookie, csrf } = await signIn(operator);
    const rendered = abandonForm((await call('/projects/alpha/handoffs/ho-w', { cookie })).text)!;
    const fields = { _csrf: csrf, idempotency_key: rendered.key!, return: rendered.back!, reason: '  no longer needed  ' };
    const sent = await call(rendered.action!, { ...form(fields), cookie });
    expect(sent.status).toBe(303);
    const location = sent.headers.get('location')!;
    expect(location).toMatch(
      new RegExp(`^/projects/alpha/handoffs/ho-w\\?sent=${encodeURIComponent('abandon:alpha:ho-w')}&outcome=applied&sig=[A-Za-z0-9_-]{22}$`),
    );
    expect(await abandons('ho-w')).toEqual([
      expect.objectContaining({ actor: 'olga', payload: expect.objectContaining({ abandoned_by: 'olga', reason: 'no longer needed' }) }),
    ]);
    await fx.caughtUp();
    const landed = await call(location, { cookie });
    expect(landed.text).toContain('data-testid="sent" data-outcome="applied">Handoff ho-w withdrawn (abandoned).');
    expect(landed.text).toContain('<dt>Kind / status</dt><dd>task / abandoned</dd>');
    expect(landed.text).toMatch(/<tr data-event-type="handoff\.abandoned">.*abandoned by olga: no longer needed<\/td><\/tr>/);
    expect(abandonForm(landed.text)).toBeNull();
    // The banner is this handoff's own: signed for this session, never shown on another page.
    expect((await call(location.replace('/ho-w?', '/ho-keep?'), { cookie })).text).not.toContain('data-testid="sent"');
    expect((await call(location, { cookie: (await signIn(operator)).cookie })).text).not.toContain('data-testid="sent"');

    // The same form again (a double submit), through the project route or the id-only one: the retry the key is for.
    expect((await call(rendered.action!, { ...form(fields), cookie })).headers.get('location')).toBe(location);
    const byId = await call('/handoffs/ho-w/abandon', { ...form(fields), cookie });
    expect({ status: byId.status, location: byId.headers.get('location') }).toEqual({ status: 303, location });
    expect(await abandons('ho-w')).toHaveLength(1);
    // A form rendered before, with its own key: the ledger's refusal, shown as the other forms show one.
    const late = await call(rendered.action!, { ...form({ ...fields, idempotency_key: 'web-late' }), cookie });
    expect(late.status).toBe(409);
    expect(late.text).toContain('role="alert"');
    expect(late.text).toContain('handoff_not_open');
    expect(late.text).toContain('href="/projects/alpha/handoffs/ho-w"');
    expect(await abandons('ho-w')).toHaveLength(1);
  });

  it('a blank reason is 400, a missing or foreign CSRF token 403, a viewer 403 and another project 404: nothing is abandoned', async () => {
    const { cookie, csrf } = await signIn(operator);
    const other = await signIn(operator);
    const path = '/projects/alpha/handoffs/ho-keep/abandon';
    const fields = { _csrf: csrf, idempotency_key: 'web-keep', return: '/projects/alpha/handoffs/ho-keep', reason: 'done with it' };
    const blank = await call(path, { ...form({ ...fields, reason: '   ' }), cookie });
    expect({ status: blank.status, code: blank.text.includes('schema_violation'), says: blank.text.includes('reason: a withdrawal says why') }).toEqual({
      status: 400,
      code: true,
      says: true,
    });
    const { reason: _reason, ...noReason } = fields;
    expect((await call(path, { ...form(noReason), cookie })).status).toBe(400);
    const { _csrf: _token, ...noCsrf } = fields;
    for (const refused of [
      await call(path, { ...form(noCsrf), cookie }),
      await call(path, { ...form({ ...fields, _csrf: other.csrf }), cookie }),
      await call(path, { ...form(fields), cookie, headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://evil.example' } }),
    ]) {
      expect({ status: refused.status, code: refused.text.includes('csrf_failed') }).toEqual({ status: 403, code: true });
    }
    const reader = await signIn(viewer);
    const byViewer = await call(path, { ...form({ ...fields, _csrf: reader.csrf }), cookie: reader.cookie });
    expect({ status: byViewer.status, code: byViewer.text.includes('role_forbidden') }).toEqual({ status: 403, code: true });
    expect((await call('/projects/beta/handoffs/ho-beta/abandon', { ...form(fields), cookie })).status).toBe(404);
    expect(await abandons('ho-keep')).toEqual([]);
    expect((await fx.events.read({ project: 'beta', kind: 'handoff', id: 'ho-beta' })).events.map((e) => e.type)).toEqual(['handoff.created']);
    expect(abandonForm((await call('/projects/alpha/handoffs/ho-keep', { cookie })).text)).not.toBeNull();
  });
});
