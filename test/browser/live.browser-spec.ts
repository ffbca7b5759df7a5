/// <reference lib="dom" />
import { randomBytes } from 'node:crypto';
import type { BrowserContext, Page } from 'playwright-core';
import type { FinishResult, HandoffOffer } from '@baton/sdk';
import { createBatonClient, type BatonAgent, type OfferSubscription } from '@baton/sdk';
import { launchChromium, startBrowserPlatform, type BrowserPlatform } from './support';

const PROJECT = 'live';
/** A one-step project: the support agent stops every run for a person, with a refund to approve. */
const definition = {
  project: PROJECT,
  lead: 'lena',
  agents: [{ name: 'support', role: 'customer support' }],
  workflows: [{ name: 'support', version: 1, entry: 'answer', steps: [{ id: 'answer', agent: 'support', terminal: true }] }],
};
type Browser = Awaited<ReturnType<typeof launchChromium>>;

/**
 * The live inbox in headless Chromium, with the four services as processes: any number of inbox
 * tabs of one browser share one live stream (the tabs elect the one that holds it, with the Web
 * Locks API or, without it, over a BroadcastChannel) and another takes over when it closes; no
 * stream is held while no tab is visible; a session that ends is said with a sign-in link and
 * loses no typed text; a refused stream (429) is tried again until a place frees up; a later page
 * stays that page; an item someone is typing in stays when another operator answers it.
 */
describe('the live inbox in headless Chromium: one stream per browser, ended sessions, pages, items answered elsewhere', () => {
  const prefix = `live${randomBytes(4).toString('hex')}`;
  const scripts = new Map<string, FinishResult[]>();
  let platform: BrowserPlatform;
  let browser: Browser | undefined;
  let fallback: Browser | undefined;
  let agent: BatonAgent;
  let offers: OfferSubscription;
  let base: string;
  let token: string;
  let context: BrowserContext;
  let runs = 0;
  const held: AbortController[] = [];

  const api = <T>(path: string) => platform.api<T>(path);
  const waitUntil = <T>(what: string, probe: () => Promise<T | undefined>) => platform.waitUntil(what, probe);

  /** Start a run the agent stops with a refund to approve; resolves with the stop's inbox item id. */
  async function newStop(): Promise<string> {
    const runId = `r${++runs}-${prefix}`;
    scripts.set(runId, [
      {
        body: `Refund ${runs} needs approval.`,
        stop: { why: 'policy', detail: `refund ${runs} over the cap` },
        pending_tool_call: { name: 'refund', args: { amount: 40 + runs, order: runs }, call_id: `call-${runs}` },
        tried: [{ name: 'lookup_order', trace_id: `tr-${runs}` }],
      },
      { decision: { dispatch: { status: 'advance' } }, body: 'Refund issued.' },
    ]);
    await agent.startRun({ workflow_run_id: runId, project: PROJECT, workflow: 'support', started_by: 'dana' });
    return waitUntil(`the stop of ${runId} in the inbox`, async () => {
      const page = await api<{ items: Array<{ id: string; workflow_run_id?: string }> }>(`/v1/inbox?project=${PROJECT}&kind=stop&limit=100`);
      return page.items.find((i) => i.workflow_run_id === runId)?.id;
    });
  }

  /**
   * How many more live streams the operator's token may open now: opened with its bearer token
   * until one is refused 429 (the cap is NOTIFIER_STREAMS_PER_TOKEN, 10), then all closed again.
   * 10 minus what the browser holds.
   */
  async function freePlaces(): Promise<number> {
    const opened: AbortController[] = [];
    try {
      for (;;) {
        const controller = new AbortController();
        const response = await fetch(`${base}/v1/events/stream`, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
        if (response.status !== 200) {
          expect(response.status).toBe(429);
          await response.body?.cancel();
          return opened.length;
        }
        opened.push(controller);
        if (opened.length > 10) throw new Error('more than 10 streams on one token');
      }
    } finally {
      for (const controller of opened) controller.abort();
      // The notifier frees a place when it sees the socket close.
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
  }
  const placesBecome = (n: number) => waitUntil(`${n} free stream places`, async () => ((await freePlaces()) === n ? true : undefined));

  const card = (page: Page, itemId: string) => page.locator(`article[data-item-id="${itemId}"]`);
  const roleOf = (page: Page) => page.locator('body').getAttribute('data-live-role');
  const isLive = (page: Page) => page.locator('#live-status[data-state="live"]').waitFor({ timeout: 20_000 });

  async function signIn(page: Page): Promise<void> {
    // The sign-in page puts the focus in the token field.
    expect((await focused(page)).name).toBe('token');
    await page.fill('input[name="token"]', token);
    await Promise.all([page.waitForURL(/\/inbox/), page.click('button[type="submit"]')]);
  }
  /** A new tab on the inbox (signed in), once its live badge says live. */
  async function openInbox(ctx: BrowserContext, path = '/inbox'): Promise<Page> {
    const page = await ctx.newPage();
    await page.goto(`${base}${path}`);
    if (new URL(page.url()).pathname === '/login') await signIn(page);
    await isLive(page);
    return page;
  }
  /** Make a tab look hidden (or visible again) to its script, as switching tabs does. */
  const setHidden = (page: Page, hidden: boolean) =>
    page.evaluate((h) => {
      if (h) Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
      else delete (document as unknown as { visibilityState?: string }).visibilityState;
      document.dispatchEvent(new Event('visibilitychange'));
    }, hidden);
  const focused = (page: Page) =>
    page.evaluate(() => {
      const a = document.activeElement;
      return {
        tag: a?.tagName ?? null,
        name: a?.getAttribute('name') ?? null,
        testid: a?.getAttribute('data-testid') ?? null,
        id: a?.id || null,
        inItem: a?.closest('article')?.getAttribute('data-item-id') ?? null,
      };
    });
  const articleIds = (page: Page) => page.locator('article[data-item-id]').evaluateAll((els) => els.map((el) => el.getAttribute('data-item-id')));
  const updates = async (page: Page) => Number((await page.locator('body').getAttribute('data-inbox-updates')) ?? '0');
  async function closeAll(ctx: BrowserContext): Promise<void> {
    for (const page of ctx.pages()) await page.close();
  }

  beforeAll(async () => {
    // Tokens and sessions re-checked every 500 ms, so a signed-out session's stream ends at once.
    platform = await startBrowserPlatform(prefix, PROJECT, definition, 'live', { NOTIFIER_STREAM_AUTH_CHECK_MS: '500' });
    ({ base, token } = platform);
    agent = await createBatonClient({ nats: platform.nats, prefix, project: PROJECT, agent: 'support' });
    offers = await agent.handoffs({
      ackWaitMs: 10_000,
      onOffer: async (offer: HandoffOffer) => {
        const step = scripts.get(String(offer.offered['workflow_run_id'] ?? ''))?.shift();
        if (!step) return;
        await offer.claim();
        await offer.finish(step);
      },
    });
    browser = await launchChromium();
    context = browser.context;
  }, 80_000);

  afterAll(async () => {
    for (const controller of held) controller.abort();
    await fallback?.close();
    await browser?.close();
    await offers?.stop().catch(() => undefined);
    await agent?.close().catch(() => undefined);
    await platform?.stop();
  }, 60_000);

  let tabs: Page[] = [];

  it('eight inbox tabs of one browser all load and go live on ONE stream (the token keeps 9 of its 10 places); an Approve in one is applied at once and the item leaves the other seven', async () => {
    const first = await newStop();
    await newStop();
    for (let i = 0; i < 8; i++) {
      // Before, each tab held its own stream: Chromium's six connections per host were spent and the seventh tab never loaded.
      tabs.push(await openInbox(context));
      await card(tabs[i]!, first).waitFor();
    }
    const roles = await Promise.all(tabs.map(roleOf));
    expect(roles.filter((r) => r === 'leader')).toHaveLength(1);
    expect(roles.filter((r) => r === 'follower')).toHaveLength(7);
    expect(await tabs[0]!.locator('body').getAttribute('data-live-mode')).toBe('locks');
    expect(await freePlaces()).toBe(9);
    // The first Tab reaches the skip link, which takes the focus to the items.
    await tabs[1]!.keyboard.press('Tab');
    expect((await focused(tabs[1]!)).testid).toBe('skip-link');
    await tabs[1]!.keyboard.press('Enter');
    expect((await focused(tabs[1]!)).id).toBe('items');

    const answering = tabs[7]!;
    const started = Date.now();
    await Promise.all([answering.waitForURL(/\/inbox\?sent=/, { timeout: 10_000 }), card(answering, first).locator('button[value="approve"]').click()]);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(await answering.locator('[data-testid="sent"]').getAttribute('data-outcome')).toBe('applied');
    // The focus goes to what the page says about the answer, not to <body>.
    expect((await focused(answering)).testid).toBe('sent');
    for (const tab of tabs.slice(0, 7)) await card(tab, first).waitFor({ state: 'detached', timeout: 20_000 });
    await isLive(answering);
  });

  it('when the tab that holds the stream closes another takes it over: the rest stay live, still on one stream', async () => {
    const leader = (await Promise.all(tabs.map(async (tab) => ((await roleOf(tab)) === 'leader' ? tab : null)))).find((t) => t !== null)!;
    await leader.close();
    tabs = tabs.filter((t) => t !== leader);
    await waitUntil('another tab to take the stream', async () =>
      (await Promise.all(tabs.map(roleOf))).filter((r) => r === 'leader').length === 1 ? true : undefined,
    );
    for (const tab of tabs) await isLive(tab);
    const next = await newStop();
    for (const tab of tabs) await card(tab, next).waitFor({ timeout: 20_000 });
    await placesBecome(9);
  });

  it('with no inbox tab visible no stream is held; a tab shown again takes it and catches up at once', async () => {
    for (const tab of tabs) await setHidden(tab, true);
    await waitUntil('every hidden tab to leave the stream (after 5 s)', async () =>
      (await Promise.all(tabs.map(roleOf))).every((r) => r === 'idle') ? true : undefined,
    );
    await placesBecome(10);
    const missed = await newStop();
    await setHidden(tabs[0]!, false);
    await isLive(tabs[0]!);
    expect(await roleOf(tabs[0]!)).toBe('leader');
    await card(tabs[0]!, missed).waitFor({ timeout: 20_000 });
    await placesBecome(9);
    for (const tab of tabs.slice(1)) await setHidden(tab, false);
    await closeAll(context);
    tabs = [];
  });

  it('an item someone is typing in stays when another operator answers it: marked answered (by whom), buttons disabled, the text and the focus kept; dismissed, the focus goes to the next item', async () => {
    const older = await newStop();
    const item = await newStop();
    const typing = await openInbox(context);
    const other = await openInbox(context);
    const note = card(typing, item).locator('textarea[name="note"]');
    await note.fill('half a thought about this refund');
    await Promise.all([other.waitForURL(/\/inbox\?sent=/), card(other, item).locator('button[value="approve"]').click()]);
    const kept = card(typing, item);
    await kept.locator('[data-testid="item-note"]').waitFor({ timeout: 20_000 });
    expect(await kept.locator('[data-testid="item-note"]').innerText()).toMatch(/^Answered by olga \(approve\) at \d{4}-\d\d-\d\dT/);
    expect(await kept.getAttribute('data-status')).toBe('answered');
    expect(await note.inputValue()).toBe('half a thought about this refund');
    expect(await kept.locator('button[name="action"]').evaluateAll((bs) => bs.map((b) => (b as HTMLButtonElement).disabled))).toEqual([true, true]);
    expect(await focused(typing)).toMatchObject({ tag: 'TEXTAREA', name: 'note', inItem: item });
    // The item the other operator's page had open without typing left it.
    await card(other, item).waitFor({ state: 'detached' });
    await kept.locator('[data-testid="dismiss"]').click();
    await kept.waitFor({ state: 'detached' });
    const after = await focused(typing);
    expect(after.tag).toBe('H2');
    expect(after.inItem).toBe(older);
    await closeAll(context);
  });

  it('a later page stays that page at the next live update (the cursor and page size are kept); the heading says how many are open and how many shown, the open count kept current', async () => {
    for (let i = 0; i < 4; i++) await newStop();
    const page = await openInbox(context, '/inbox?limit=2');
    expect(await articleIds(page)).toHaveLength(2);
    expect(await page.locator('[data-testid="shown"]').innerText()).toMatch(/^\(\d+ open; 2 shown; more on the next page\)$/);
    const open = Number(await page.locator('#open-count').innerText());
    expect(open).toBeGreaterThanOrEqual(4);
    await Promise.all([page.waitForURL(/cursor=/), page.locator('[data-testid="more"]').click()]);
    await isLive(page);
    const second = await articleIds(page);
    expect(second).toHaveLength(2);
    await waitUntil('the first refresh', async () => ((await updates(page)) >= 1 ? true : undefined));
    const seen = await updates(page);
    const firstPage = await openInbox(context, '/inbox?limit=2');
    const newest = await newStop();
    await card(firstPage, newest).waitFor({ timeout: 20_000 });
    await waitUntil('page 2 to reconcile', async () => ((await updates(page)) > seen ? true : undefined));
    expect(await articleIds(page)).toEqual(second);
    expect(await page.locator('#item-count').innerText()).toBe('2');
    // The open count is the inbox's, not the page's: page 2 counts the new stop too.
    await waitUntil('the open count to take the new stop', async () => (Number(await page.locator('#open-count').innerText()) === open + 1 ? true : undefined));
    await closeAll(context);
  });

  it('a session that ends (signed out in another tab) is said with a sign-in link; the typed text stays; a form sent after it offers a sign-in link; signed in again, the text is put back', async () => {
    const c = await newStop();
    const a = await newStop();
    const b = await newStop();
    const leaving = await openInbox(context);
    const staying = await openInbox(context);
    await card(staying, a).locator('textarea[name="note"]').fill('typed before the sign-out');
    await card(staying, c).locator('textarea[name="note"]').fill('typed for an item someone else answers');
    await Promise.all([leaving.waitForURL(/\/login/), leaving.locator('header form button[type="submit"]').click()]);
    const ended = staying.locator('[data-testid="session-ended"]');
    await ended.waitFor({ timeout: 20_000 });
    expect(await staying.locator('#live-status').getAttribute('data-state')).toBe('ended');
    expect(await ended.innerText()).toContain('Your session ended');
    expect(await ended.locator('[data-testid="sign-in"]').getAttribute('href')).toBe('/login?next=%2Finbox');
    expect(await card(staying, a).locator('textarea[name="note"]').inputValue()).toBe('typed before the sign-out');
    // Sent anyway: refused, with a way to sign in again (it offered only "← Back").
    await card(staying, b).locator('textarea[name="note"]').fill('sent after the sign-out');
    await Promise.all([staying.waitForURL(/\/answer$/), card(staying, b).locator('button[value="deny"]').click()]);
    expect(await staying.locator('[data-testid="refused"]').innerText()).toContain('unauthenticated');
    // Meanwhile another operator (a script, here) closes c.
    const packet = c.split(':').slice(2).join(':');
    const denied = await fetch(`${base}/v1/projects/${PROJECT}/stops/${encodeURIComponent(packet)}/answer`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ action: 'deny', answer_id: `api-${prefix}` }),
    });
    expect(denied.status).toBe(200);
    await Promise.all([staying.waitForURL(/\/login\?next=/), staying.locator('[data-testid="sign-in"]').click()]);
    await signIn(staying);
    await isLive(staying);
    expect(await card(staying, a).locator('textarea[name="note"]').inputValue()).toBe('typed before the sign-out');
    expect(await card(staying, b).locator('textarea[name="note"]').inputValue()).toBe('sent after the sign-out');
    expect(await card(staying, b).locator('[data-note="restored"]').count()).toBe(1);
    // The text typed for the item answered meanwhile is shown, with what became of it.
    const unsent = staying.locator('[data-testid="unsent-draft"]');
    await unsent.waitFor();
    expect(await unsent.innerText()).toMatch(/^Not sent: what you typed for ".+"\. Answered by olga \(deny\) at .+\ntyped for an item someone else answers/);
    expect(await card(staying, c).count()).toBe(0);
    // Nothing was sent: both stops are still open.
    const open = await api<{ items: Array<{ id: string }> }>(`/v1/inbox?project=${PROJECT}&kind=stop&limit=100`);
    expect(open.items.map((i) => i.id)).toEqual(expect.arrayContaining([a, b]));
    await closeAll(context);
  });

  it('a stream refused 429 too_many_streams is tried again (after Retry-After, backing off) until a place frees up; the badge says it waits', async () => {
    await placesBecome(10);
    for (let i = 0; i < 10; i++) {
      const controller = new AbortController();
      const response = await fetch(`${base}/v1/events/stream`, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
      expect(response.status).toBe(200);
      held.push(controller);
    }
    const page = await context.newPage();
    await page.goto(`${base}/inbox`);
    await page.locator('#live-status[data-state="waiting"]').waitFor({ timeout: 10_000 });
    expect(await page.locator('#live-status').innerText()).toMatch(/^waiting for a free live stream \(too_many_streams\); trying again in \d+ s$/);
    held.pop()!.abort();
    await page.locator('#live-status[data-state="live"]').waitFor({ timeout: 30_000 });
    for (const controller of held.splice(0)) controller.abort();
    await closeAll(context);
  });

  it('without the Web Locks API (an http:// page off localhost) the tabs elect the stream holder over a BroadcastChannel: one stream, and a new holder when it closes', async () => {
    fallback = await launchChromium();
    await fallback.context.addInitScript(() => {
      delete (Navigator.prototype as unknown as { locks?: unknown }).locks;
    });
    let pages: Page[] = [];
    for (let i = 0; i < 4; i++) pages.push(await openInbox(fallback.context));
    expect(await Promise.all(pages.map((p) => p.locator('body').getAttribute('data-live-mode')))).toEqual(['channel', 'channel', 'channel', 'channel']);
    await waitUntil('one stream holder', async () => ((await Promise.all(pages.map(roleOf))).filter((r) => r === 'leader').length === 1 ? true : undefined));
    await placesBecome(9);
    const leader = (await Promise.all(pages.map(async (p) => ((await roleOf(p)) === 'leader' ? p : null)))).find((p) => p !== null)!;
    await leader.close();
    pages = pages.filter((p) => p !== leader);
    await waitUntil('a new stream holder', async () => ((await Promise.all(pages.map(roleOf))).filter((r) => r === 'leader').length === 1 ? true : undefined));
    for (const page of pages) await isLive(page);
    const next = await newStop();
    for (const page of pages) await card(page, next).waitFor({ timeout: 20_000 });
    await placesBecome(9);
  });
});
