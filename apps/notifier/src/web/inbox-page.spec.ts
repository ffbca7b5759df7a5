import { raiseCapForm, typeIntentForm } from '@baton/domain';
import type { NextForm, StopPacket } from '@baton/contracts';
import { InboxWhys, type InboxItem } from '@baton/projections';
import type { Principal } from '../auth/roles';
import { inboxPage, itemCard, type ItemDetails } from './inbox-page';
import { loginPage, errorPage } from './other-pages';

const operator: Principal = { tokenId: 't1', name: 'olga', role: 'operator', projects: ['acme'], via: 'session' };
const ctx = { principal: operator, csrf: 'c' };

/** An open stop item of project acme whose packet carries `form`. */
function stopWith(form: NextForm, cap?: StopPacket['cap']): ItemDetails {
  const item = {
    id: 'stop:acme:p1',
    project: 'acme',
    kind: 'stop',
    status: 'open',
    urgency: 2,
    at: 0,
    title: 'A stop',
    opened_at: '2026-12-05T00:00:00.000Z',
    packet_id: 'p1',
  } as unknown as InboxItem;
  const stop = {
    stop: 'handoff',
    packet_id: 'p1',
    why: 'budget',
    tried: [],
    trace_ids: [],
    pending: null,
    pending_digest: null,
    run_id: 'r1',
    workflow_run_id: 'wr-1',
    project: 'acme',
    agent: 'support',
    step: 'answer',
    user_msg: 'Working on it.',
    next_form: form,
    ...(cap ? { cap } : {}),
    goal_done: false,
    created_at: '2026-12-05T00:00:00.000Z',
    status: 'open',
  } as StopPacket;
  return { kind: 'stop', item, record: { stop, effect: null, answered_at: null, mesh_run_id: null } };
}

describe('the console inbox page', () => {
  it('offers every why the API filters by, an escalation`s offer_given_up among them (the list is the API`s own)', () => {
    const page = inboxPage({
      ctx: { principal: null, csrf: null },
      filters: { status: 'open' },
      query: '',
      firstPage: '',
      later: false,
      items: [],
      nextCursor: null,
      openCount: 0,
    });
    const select = /<select[^>]*name="why"[^>]*>([\s\S]*?)<\/select>/.exec(page)?.[1] ?? '';
    const offered = [...select.matchAll(/<option value="([^"]*)"/g)].map((m) => m[1]).filter((v) => v !== '');
    expect(offered).toEqual([...InboxWhys]);
    expect(offered).toEqual(expect.arrayContaining(['offer_given_up', 'lease_expired', 'rework', 'hold', 'human_gate', 'circuit_open']));
  });
  it('a handback whose reviewer gave up on its offer says so on its card: who, and why', () => {
    const item = {
      id: 'handback:acme:hb-1',
      project: 'acme',
      kind: 'handback',
      status: 'open',
      urgency: 2,
      at: 0,
      title: 'Review the return of h-1',
      opened_at: '2026-12-05T00:00:00.000Z',
      handoff_id: 'hb-1',
      offer_given_up_by: 'alice',
      offer_given_up_reason: 'onOffer failed 5 times: <model down>',
    } as unknown as InboxItem;
    const card = itemCard({ kind: 'handback', item, handoff: null }, { principal: null, csrf: null }, '/inbox').toString();
    expect(card).toContain('data-testid="offer-given-up">by alice: onOffer failed 5 times: &lt;model down&gt;</dd>');
  });
  it('a hold whose result left a call pending shows the call, and says which answers hand it on (Reroute only when nothing to continue to)', () => {
    const hold = (pendingTarget: unknown) =>
      ({
        id: 'hold:7:acme:wr-1',
        project: 'acme',
        kind: 'hold',
        status: 'open',
        urgency: 2,
        at: 0,
        title: 'Approve the human gate at s1',
        opened_at: '2026-12-05T00:00:00.000Z',
        workflow_run_id: 'wr-1',
        hold_kind: 'human_gate',
        step: 's1',
        pending_target: pendingTarget,
        pending_call: { name: 'wire', args: { to: 'acct-<1>', usd: 9000 } },
      }) as unknown as InboxItem;
    const gated = itemCard({ kind: 'hold', item: hold({ agent: 'b', step: 's2' }) } as never, { principal: null, csrf: null }, '/inbox').toString();
    expect(gated).toContain('<dt>Pending call</dt>');
    expect(gated).toContain('acct-&lt;1&gt;');
    expect(gated).toContain('Continue or Reroute hands it on (not approved)');
    const nowhere = itemCard({ kind: 'hold', item: hold(null) } as never, { principal: null, csrf: null }, '/inbox').toString();
    expect(nowhere).toContain('Reroute hands it on (not approved)');
    expect(nowhere).not.toContain('Continue or Reroute hands');
    const none = itemCard({ kind: 'hold', item: { ...hold(null), pending_call: undefined } } as never, { principal: null, csrf: null }, '/inbox').toString();
    expect(none).not.toContain('Pending call');
  });

  it('the kind-of-request list is required (the browser asks for it before Route), and Close sends without it', () => {
    const card = itemCard(stopWith(typeIntentForm(['billing', 'refunds'])), ctx, '/inbox').toString();
    expect(card).toContain('<select name="intent" required><option value="">Choose…</option><option value="billing">billing</option>');
    expect(card).toMatch(/<button class="btn primary" type="submit" name="action" value="intent">Route<\/button>/);
    expect(card).toMatch(/<button class="btn danger" type="submit" name="action" value="deny" formnovalidate>Close<\/button>/);
    const typed = itemCard(stopWith(typeIntentForm(undefined)), ctx, '/inbox').toString();
    expect(typed).toMatch(/<input name="intent" required data-required="true"/);
  });

  it('the new cap field says its limits to the browser: required, a whole number above the current cap (min), at most the most', () => {
    const whole = itemCard(
      stopWith(raiseCapForm({ name: 'turns', limit: 10, used: 10, whole: true }, undefined, { atMost: 1000 }), {
        name: 'turns',
        limit: 10,
        used: 10,
        whole: true,
      }),
      ctx,
      '/inbox',
    ).toString();
    expect(whole).toMatch(/<input type="number" step="1" name="cap" required value="20" data-greater-than="10" min="11" max="1000">/);
    expect(whole).toMatch(/value="deny" formnovalidate>Stop</);
    expect(whole).toMatch(/value="raise_cap">Raise cap</);
    const decimal = itemCard(stopWith(raiseCapForm({ name: 'usd', limit: 2.5 })), ctx, '/inbox').toString();
    expect(decimal).toMatch(/<input type="number" step="any" name="cap" required value="5" data-greater-than="2.5" min="2.5">/);
  });

  it('a card says what became of its item (status, how, by whom, when), which the live script tells an operator typing in it', () => {
    const answered = { ...stopWith(typeIntentForm(['billing'])) } as Extract<ItemDetails, { kind: 'stop' }>;
    const item = {
      ...answered.item,
      status: 'answered',
      resolution: 'answered:deny',
      closed_by: 'omar',
      closed_at: '2026-12-05T01:00:00.000Z',
    } as unknown as InboxItem;
    const card = itemCard({ ...answered, item }, ctx, '/inbox').toString();
    expect(card).toContain(
      'data-status="answered" data-kind="stop" data-resolution="answered:deny" data-closed-by="omar" data-closed-at="2026-12-05T01:00:00.000Z"',
    );
  });

  it('the page reconciles against its own query (cursor and page size kept), says how many items are open and how many it shows, and links the next and first pages', () => {
    const details = stopWith(typeIntentForm(['billing']));
    const later = inboxPage({
      ctx,
      filters: { status: 'open' },
      query: '?limit=2&cursor=abc',
      firstPage: '?limit=2',
      later: true,
      items: [details],
      nextCursor: 'def',
      openCount: 7,
    });
    expect(later).toContain('<section id="items" tabindex="-1" aria-label="Items" data-query="?limit&#61;2&amp;cursor&#61;abc">');
    // The heading: the open items the filters select (the inbox's size), then the page's.
    expect(later).toContain(
      '(<span id="open-count" data-testid="open-count">7</span> open; <span id="item-count">1</span> shown on this page<span id="more-note">; more on the next page</span>)',
    );
    expect(later).toContain('<a href="/inbox?limit&#61;2&amp;cursor&#61;def" data-testid="more">More…</a>');
    expect(later).toContain('<a href="/inbox?limit&#61;2" data-testid="first-page">← First page</a>');
    // The answer forms come back to this page.
    expect(later).toContain('name="return" value="/inbox?limit&#61;2&amp;cursor&#61;abc"');
    const first = inboxPage({
      ctx,
      filters: { status: 'open' },
      query: '',
      firstPage: '',
      later: false,
      items: [details, details],
      nextCursor: null,
      openCount: 2,
    });
    expect(first).toContain('(<span id="open-count" data-testid="open-count">2</span> open; <span id="item-count">2</span> shown)');
    expect(first).not.toContain('data-testid="more"');
    expect(first).not.toContain('Inbox <span class="muted">(<span id="item-count">2</span>)');
  });

  it('accessibility: a skip link to the items; the answer banner is a polite live region that takes the focus; the live badge is a live region; the sign-in field has the focus', () => {
    const page = inboxPage({
      ctx,
      filters: { status: 'open' },
      query: '',
      firstPage: '',
      later: false,
      items: [],
      nextCursor: null,
      openCount: 0,
      sent: 'stop:acme:p1',
      outcome: 'applied',
    });
    expect(page).toMatch(/<body>\s*<a class="skip" href="#items" data-testid="skip-link">Skip to the items<\/a>/);
    expect(page).toContain('<div class="banner ok" role="status" tabindex="-1" autofocus data-testid="sent" data-outcome="applied">');
    expect(page).toContain('<span id="live-status" class="live" role="status" aria-live="polite" data-state="connecting">');
    expect(loginPage({ csrf: 'x', next: '/inbox' })).toContain('<input type="password" name="token" autocomplete="off" required autofocus>');
  });

  it('webhooks failing for the session`s projects are listed above the items, by name and id, with since when and why; none failing, no section', () => {
    const base = { ctx, filters: { status: 'open' }, query: '', firstPage: '', later: false, items: [], nextCursor: null, openCount: 0 };
    expect(inboxPage(base)).not.toContain('data-testid="failing-webhooks"');
    const page = inboxPage({
      ...base,
      failingWebhooks: [
        {
          project: 'acme',
          status: {
            id: '0123456789abcdef',
            name: 'chat.example/hooks/<b>',
            state: 'failing',
            last_success: null,
            last_failure: { at: '2026-12-05T01:00:00.000Z', notice_id: 'nt-r-1', reason: 'connection_refused', error: 'connect ECONNREFUSED 10.0.0.7:443' },
            failing_since: '2026-12-05T00:59:00.000Z',
            dead_lettered: 2,
            last_dead_lettered: { at: '2026-12-05T01:00:00.000Z', notice_id: 'nt-r-0' },
          },
        },
      ],
    });
    const section = /<section class="banner error webhooks"[\s\S]*?<\/section>/.exec(page)?.[0] ?? '';
    expect(section).toContain('<strong>chat.example/hooks/&lt;b&gt;</strong> <span class="muted">[0123456789abcdef]</span> · project acme');
    expect(section).toContain('failing since <time datetime="2026-12-05T00:59:00.000Z">');
    expect(section).toContain('last: <code>connection_refused</code> connect ECONNREFUSED 10.0.0.7:443 · 2 dead-lettered');
  });

  it('a refusal page keeps its code, says it in words with the API text under Details, and after a session ended links to the sign-in page', () => {
    const page = errorPage(ctx, {
      status: 401,
      code: 'unauthenticated',
      message: 'Your session ended.',
      back: '/inbox?why=policy',
      signIn: '/inbox?why=policy',
    });
    expect(page).toContain('<strong>unauthenticated</strong>: Your session ended.');
    expect(page).toContain('<a class="btn primary" href="/login?next=%2Finbox%3Fwhy%3Dpolicy" data-testid="sign-in">Sign in again</a>');
    const worded = errorPage(ctx, { status: 400, code: 'schema_violation', message: 'Choose the kind of request.', detail: 'intent: Too small' });
    expect(worded).toContain(
      '<strong>schema_violation</strong>: Choose the kind of request.<details class="detail"><summary>Details</summary><code data-testid="refusal-detail">intent: Too small</code></details>',
    );
  });
});
