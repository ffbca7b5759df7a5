/// <reference lib="dom" />
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import type { FinishResult, HandoffOffer } from '@baton/sdk';
import { createBatonClient, type BatonAgent, type OfferSubscription } from '@baton/sdk';
import { launchChromium, SHOTS, startBrowserPlatform, type BrowserPlatform } from './support';

const PROJECT = 'web';
/** A one-step project: the support agent answers, or stops for a person. */
const definition = {
  project: PROJECT,
  lead: 'lena',
  agents: [{ name: 'support', role: 'customer support' }],
  workflows: [{ name: 'support', version: 1, entry: 'answer', steps: [{ id: 'answer', agent: 'support', terminal: true }] }],
};
type Win = { __xss?: number; __sameDocument?: boolean };
/** Every agent-written field of the second stop carries this; it must show as text and never run. */
const XSS = `<img src=x onerror="window.__xss=1;alert(1)"><script>window.__xss=2</script>`;

interface Shot {
  name: string;
  width: number;
  height: number;
  bytes: number;
  text: string;
}

/** Take a full-page PNG, save it under var/screenshots, and read back its size and the page text at that moment. */
async function screenshot(page: Page, name: string): Promise<Shot> {
  const png = await page.screenshot({ fullPage: true, type: 'png' });
  await writeFile(join(SHOTS, `${name}.png`), png);
  expect(png.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
  expect(png.subarray(12, 16).toString('ascii')).toBe('IHDR');
  return { name, width: png.readUInt32BE(16), height: png.readUInt32BE(20), bytes: png.length, text: await page.innerText('body') };
}

function expectSane(shot: Shot): void {
  expect({ name: shot.name, sane: shot.width >= 800 && shot.width <= 2000 && shot.height >= 300 && shot.height <= 20000 && shot.bytes > 8_000 }).toEqual({
    name: shot.name,
    sane: true,
  });
}

/**
 * The operator's web inbox end to end: the four services as processes with a random prefix, a run
 * stopped by an agent through the SDK, an operator token made with the CLI, and headless Chromium
 * signing in, approving through the form, watching the item leave live, and opening the timeline.
 */
describe('the web inbox in headless Chromium (four services as processes)', () => {
  const prefix = `web${randomBytes(4).toString('hex')}`;
  const scripts = new Map<string, FinishResult[]>();
  let platform: BrowserPlatform;
  let browser: Awaited<ReturnType<typeof launchChromium>> | undefined;
  let agent: BatonAgent;
  let offers: OfferSubscription;
  let base: string;
  let token: string;
  let context: BrowserContext;
  let refundPacket: string;
  let xssPacket: string;
  const dialogs: string[] = [];

  const api = <T>(path: string) => platform.api<T>(path);
  const waitUntil = <T>(what: string, probe: () => Promise<T | undefined>) => platform.waitUntil(what, probe);
  const stopOf = (runId: string) =>
    waitUntil(`the stop of ${runId} in the inbox`, async () => {
      const page = await api<{ items: Array<{ workflow_run_id?: string; packet_id?: string }> }>(`/v1/inbox?project=${PROJECT}&kind=stop&limit=100`);
      return page.items.find((i) => i.workflow_run_id === runId)?.packet_id;
    });

  beforeAll(async () => {
    platform = await startBrowserPlatform(prefix, PROJECT, definition, 'e2e');
    ({ base, token } = platform);
    // A support agent (the SDK) that finishes each offer with its script.
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
    const refundRun = `refund-${prefix}`;
    scripts.set(refundRun, [
      {
        body: 'Refund needs approval.',
        stop: { why: 'policy', detail: 'refund over the cap' },
        pending_tool_call: { name: 'refund', args: { amount: 40, order: 99 }, call_id: 'call-1' },
        tried: [{ name: 'lookup_order', trace_id: 'tr-1' }],
      },
      { decision: { dispatch: { status: 'advance' } }, body: 'Refund issued.' },
    ]);
    const xssRun = `xss-${prefix}`;
    scripts.set(xssRun, [
      { body: XSS, stop: { why: 'policy', detail: XSS }, pending_tool_call: { name: XSS, args: { note: XSS } }, tried: [{ name: XSS, trace_id: XSS }] },
    ]);
    for (const runId of [refundRun, xssRun]) await agent.startRun({ workflow_run_id: runId, project: PROJECT, workflow: 'support', started_by: 'dana' });
    refundPacket = await stopOf(refundRun);
    xssPacket = await stopOf(xssRun);

    browser = await launchChromium();
    context = browser.context;
    context.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
  }, 80_000);

  afterAll(async () => {
    await browser?.close();
    await offers?.stop().catch(() => undefined);
    await agent?.close().catch(() => undefined);
    await platform?.stop();
  }, 60_000);

  const card = (page: Page, packet: string) => page.locator(`article[data-item-id="stop:${PROJECT}:${packet}"]`);

  it('an operator signs in with a token and sees the stop: the user message, the why, what was tried (linked to the timeline), the frozen call and its form', async () => {
    const page = await context.newPage();
    await page.goto(`${base}/inbox`);
    expect(new URL(page.url()).pathname).toBe('/login');
    await page.fill('input[name="token"]', token);
    await page.click('button[type="submit"]');
    await page.waitForLoadState();
    if (new URL(page.url()).pathname !== '/inbox') throw new Error(`sign-in failed at ${page.url()}: ${await page.innerText('body')}`);
    const item = card(page, refundPacket);
    await item.waitFor();
    await page.locator('#live-status[data-state="live"]').waitFor();
    const shot = await screenshot(page, '1-inbox');
    expectSane(shot);
    expect(shot.text).toContain('olga · operator · projects web');
    const text = await item.innerText();
    expect(text).toContain('This needs a person to approve it');
    expect(text).toContain('policy — refund over the cap');
    expect(text).toContain('lookup_order');
    expect(text).toMatch(/"amount": 40/);
    expect(await item.locator('a', { hasText: 'lookup_order' }).getAttribute('href')).toBe(`/projects/${PROJECT}/runs/refund-${prefix}#timeline`);
    expect(await item.locator('button[name="action"]').evaluateAll((buttons) => buttons.map((b) => (b as unknown as { value: string }).value))).toEqual([
      'approve',
      'deny',
    ]);
    expect(shot.text).toContain(text.split('\n')[0]!);
    await page.close();
  });

  it('approving through the form resumes the run; the item leaves an open inbox live (server-sent events), without a reload', async () => {
    const watcher = await context.newPage();
    await watcher.goto(`${base}/inbox`);
    await card(watcher, refundPacket).waitFor();
    await watcher.locator('#live-status[data-state="live"]').waitFor();
    await watcher.evaluate(() => {
      (globalThis as unknown as Win).__sameDocument = true;
    });
    const page = await context.newPage();
    await page.goto(`${base}/inbox`);
    await Promise.all([page.waitForURL(/\/inbox\?sent=/), card(page, refundPacket).locator('button[value="approve"]').click()]);
    expect(await page.locator('[data-testid="sent"]').innerText()).toContain(`stop:${PROJECT}:${refundPacket}`);
    // The form waited for the router's decision: the banner says the answer was applied, not just sent.
    expect(await page.locator('[data-testid="sent"]').getAttribute('data-outcome')).toBe('applied');
    expect(await page.locator('[data-testid="sent"]').innerText()).toContain('applied');
    // The watcher never navigated: the item is removed by the live script.
    await card(watcher, refundPacket).waitFor({ state: 'detached', timeout: 20_000 });
    expect(await watcher.evaluate(() => (globalThis as unknown as Win).__sameDocument)).toBe(true);
    expect(Number(await watcher.locator('body').getAttribute('data-inbox-updates'))).toBeGreaterThan(0);
    const shot = await screenshot(watcher, '2-inbox-after-approve');
    expectSane(shot);
    expect(shot.text).not.toContain('refund over the cap');
    const completed = await waitUntil('the run to complete', async () => {
      const view = await api<{ run: { status: string } }>(`/v1/projects/${PROJECT}/runs/refund-${prefix}`);
      return view.run.status === 'completed' ? view : undefined;
    });
    expect(completed.run.status).toBe('completed');
    await page.close();
    await watcher.close();
  });

  it('the run timeline page shows every event, who or what decided it, and its origin', async () => {
    const page = await context.newPage();
    await page.goto(`${base}/projects/${PROJECT}/runs/refund-${prefix}`);
    const rows = await page
      .locator('#timeline tbody tr')
      .evaluateAll((trs) =>
        trs.map((tr) =>
          Array.from((tr as unknown as { querySelectorAll(s: string): ArrayLike<{ textContent: string | null }> }).querySelectorAll('td')).map(
            (td) => td.textContent ?? '',
          ),
        ),
      );
    const types = rows.map((r) => r[2]);
    expect(types).toEqual(expect.arrayContaining(['run.started', 'run.routed', 'run.stopped', 'run.resumed', 'run.completed']));
    const resumed = rows.find((r) => r[2] === 'run.resumed')!;
    expect(resumed[3]).toBe('olga');
    expect(resumed[4]).toBeTruthy();
    expect(rows.every((r) => r[3] !== '' && r[4] !== '')).toBe(true);
    const shot = await screenshot(page, '3-run-timeline');
    expectSane(shot);
    expect(shot.text).toContain(`Run refund-${prefix}`);
    expect(shot.text).toContain('approve by olga');
    await page.close();
  });

  it('agent-produced script-injection payloads in every field are shown as text and never run', async () => {
    const page = await context.newPage();
    await page.goto(`${base}/inbox`);
    const item = card(page, xssPacket);
    await item.waitFor();
    const text = await item.innerText();
    expect(text.split(XSS).length - 1).toBeGreaterThanOrEqual(3);
    expect(await item.locator('script, img, svg, iframe').count()).toBe(0);
    await page.goto(`${base}/projects/${PROJECT}/runs/xss-${prefix}`);
    expect(await page.innerText('body')).toContain(XSS);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await page.evaluate(() => (globalThis as unknown as Win).__xss)).toBeUndefined();
    expect(dialogs).toEqual([]);
    const shot = await screenshot(page, '4-xss-as-text');
    expectSane(shot);
    await page.close();
  });
});
