/// <reference lib="dom" />
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import {
  createBatonClient,
  handoffCallsFromOpenAi,
  publishMeshResult,
  startMesh,
  type BatonAgent,
  type HandoffOffer,
  type OfferSubscription,
} from '@baton/sdk';
import { launchChromium, SHOTS, startBrowserPlatform, type BrowserPlatform } from './support';

const PROJECT = 'webmesh';

/** Two agents that hand a conversation back and forth; the cap stops them at 3 turns. */
const definition = {
  project: PROJECT,
  lead: 'lena',
  agents: [
    { name: 'triage', role: 'front desk' },
    { name: 'billing', role: 'billing' },
  ],
  workflows: [{ name: 'noop', version: 1, entry: 'only', steps: [{ id: 'only', agent: 'triage', terminal: true }] }],
  meshes: [{ name: 'support', entry: 'triage', handoffs: { triage: ['billing'], billing: ['triage'] }, outputs: [], max_iterations: 3 }],
};

/** One scripted turn: what the agent says and the tools an OpenAI-style model calls. */
interface Turn {
  text: string;
  calls: string[];
}

/**
 * The mesh run view in the web inbox (issue 14), end to end: the four services as processes, a
 * mesh driven through the SDK until its cap stops it (one call to an unknown tool on the way),
 * an operator in headless Chromium following the stop item's link to the mesh page — turns,
 * handoffs taken, the call ignored and why, the cap, the outcome — then raising the cap through
 * the form and reading the completed mesh on the same page.
 */
describe('the mesh run page in headless Chromium (four services as processes)', () => {
  const prefix = `wm${randomBytes(4).toString('hex')}`;
  const meshRunId = `mesh-${prefix}`;
  const scripts = new Map<string, Turn[]>([
    [
      'triage',
      [
        { text: 'An invoice question: over to billing.', calls: ['handoff_to_legal', 'handoff_to_billing'] },
        { text: 'Billing again, please.', calls: ['handoff_to_billing'] },
      ],
    ],
    [
      'billing',
      [
        { text: 'Not mine; back to triage.', calls: ['handoff_to_triage'] },
        { text: 'Refunded the duplicate charge.', calls: [] },
      ],
    ],
  ]);
  const clients: BatonAgent[] = [];
  const subscriptions: OfferSubscription[] = [];
  let platform: BrowserPlatform;
  let browser: Awaited<ReturnType<typeof launchChromium>> | undefined;
  let base: string;
  let token: string;
  let context: BrowserContext;
  let packet: string;
  let turns = 0;

  const api = <T>(path: string) => platform.api<T>(path);
  const waitUntil = <T>(what: string, probe: () => Promise<T | undefined>) => platform.waitUntil(what, probe);

  const meshAgent = (name: string) => async (offer: HandoffOffer) => {
    const mesh = (offer.offered['context'] as { mesh?: { mesh_run_id?: string } } | undefined)?.mesh;
    if (mesh?.mesh_run_id !== meshRunId) return;
    const turn = scripts.get(name)?.shift();
    if (!turn) return;
    await offer.claim();
    const calls = turn.calls.map((tool) => ({ id: `call-${++turns}`, type: 'function', function: { name: tool, arguments: '{}' } }));
    await publishMeshResult(
      { js: platform.nats.js, prefix },
      {
        project: PROJECT,
        mesh_run_id: meshRunId,
        agent: name,
        result_id: `${meshRunId}-t${turns}-${name}`,
        text: turn.text,
        handoff_tool_calls: handoffCallsFromOpenAi(calls),
        handoff_id: offer.handoffId,
        claim_id: offer.claimId ?? undefined,
      },
    );
  };

  beforeAll(async () => {
    platform = await startBrowserPlatform(prefix, PROJECT, definition, 'mesh-browser');
    ({ base, token } = platform);
    for (const name of ['triage', 'billing']) {
      const client = await createBatonClient({ nats: platform.nats, prefix, project: PROJECT, agent: name });
      clients.push(client);
      subscriptions.push(await client.handoffs({ ackWaitMs: 10_000, onOffer: meshAgent(name) }));
    }
    await startMesh(
      { js: platform.nats.js, prefix },
      { mesh_run_id: meshRunId, project: PROJECT, mesh: 'support', input: 'I was charged twice', started_by: 'dana' },
    );
    packet = await waitUntil('the mesh stop in the inbox', async () => {
      const page = await api<{ items: Array<{ mesh_run_id?: string; packet_id?: string }> }>(`/v1/inbox?project=${PROJECT}&kind=stop&limit=100`);
      return page.items.find((i) => i.mesh_run_id === meshRunId)?.packet_id;
    });

    browser = await launchChromium();
    context = browser.context;
  }, 80_000);

  afterAll(async () => {
    await browser?.close();
    for (const subscription of subscriptions) await subscription.stop().catch(() => undefined);
    for (const client of clients) await client.close().catch(() => undefined);
    await platform?.stop();
  }, 60_000);

  const card = (page: Page) => page.locator(`article[data-item-id="stop:${PROJECT}:${packet}"]`);
  const rows = (page: Page, testId: string) =>
    page
      .locator(`[data-testid="${testId}"]`)
      .evaluateAll((trs) => trs.map((tr) => Array.from((tr as HTMLElement).querySelectorAll('td')).map((td) => (td.textContent ?? '').trim())));

  it('the mesh stop item links to the mesh page: its turns, the handoffs taken, the call ignored and why, the cap and the outcome', async () => {
    const page = await context.newPage();
    await page.goto(`${base}/inbox`);
    await page.fill('input[name="token"]', token);
    await page.click('button[type="submit"]');
    await page.waitForLoadState();
    if (new URL(page.url()).pathname !== '/inbox') throw new Error(`sign-in failed at ${page.url()}: ${await page.innerText('body')}`);
    const link = card(page).locator('[data-testid="mesh-link"]');
    expect(await link.getAttribute('href')).toBe(`/projects/${PROJECT}/meshes/${meshRunId}`);
    await Promise.all([page.waitForURL(new RegExp(`/projects/${PROJECT}/meshes/`)), link.click()]);

    expect(await page.locator('[data-testid="mesh-status"]').innerText()).toBe('stopped');
    expect(await page.locator('[data-testid="mesh-cap"]').innerText()).toBe('3 of 3 turns used');
    expect(await page.locator('[data-testid="mesh-outcome"]').innerText()).toContain(`stopped at its cap: packet ${packet}`);
    const turnsShown = await rows(page, 'mesh-turn');
    expect(turnsShown.map((r) => [r[0], r[1], r[2], r[3]])).toEqual([
      ['1', 'triage', 'An invoice question: over to billing.', 'handoff_to_legal, handoff_to_billing'],
      ['2', 'billing', 'Not mine; back to triage.', 'handoff_to_triage'],
      ['3', 'triage', 'Billing again, please.', 'handoff_to_billing'],
    ]);
    expect((await rows(page, 'mesh-handoff')).map((r) => [r[0], r[1], r[2]])).toEqual([
      ['2', 'triage', 'billing'],
      ['3', 'billing', 'triage'],
    ]);
    const ignored = await rows(page, 'mesh-ignored-call');
    expect(ignored.map((r) => [r[0], r[1], r[2], r[3]])).toEqual([['1', 'triage', 'handoff_to_legal', 'unknown_tool']]);
    expect(await page.locator('[data-testid="mesh-stop"]').innerText()).toContain('triage → billing');
    await writeFile(join(SHOTS, 'mesh-1-stopped.png'), await page.screenshot({ fullPage: true, type: 'png' }));
    await page.close();
  });

  it('raising the cap through the form continues the mesh; its page then shows the raise, the handoff after it and the output', async () => {
    const page = await context.newPage();
    await page.goto(`${base}/inbox`);
    await card(page).locator('input[name="cap"]').fill('5');
    await Promise.all([page.waitForURL(/\/inbox\?sent=/), card(page).locator('button[value="raise_cap"]').click()]);
    await waitUntil('the mesh to complete', async () => {
      const view = await api<{ mesh: { status: string } }>(`/v1/projects/${PROJECT}/meshes/${meshRunId}`);
      return view.mesh.status === 'completed' ? true : undefined;
    });
    await page.goto(`${base}/projects/${PROJECT}/meshes/${meshRunId}`);
    expect(await page.locator('[data-testid="mesh-status"]').innerText()).toBe('completed');
    expect(await page.locator('[data-testid="mesh-cap"]').innerText()).toBe('4 of 5 turns used (raised 3 → 5 by olga)');
    expect(await page.locator('[data-testid="mesh-outcome"]').innerText()).toContain('completed by billing after 4 turns');
    expect(await page.locator('[data-testid="mesh-output"]').innerText()).toBe('Refunded the duplicate charge.');
    const handoffs = await rows(page, 'mesh-handoff');
    expect(handoffs.at(-1)?.slice(0, 4)).toEqual(['4', 'triage', 'billing', 'handoff_to_billing (after the cap was raised)']);
    await writeFile(join(SHOTS, 'mesh-2-completed.png'), await page.screenshot({ fullPage: true, type: 'png' }));
    await page.close();
  });
});
