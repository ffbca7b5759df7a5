import { randomBytes } from 'node:crypto';
import { handoffToolName, MeshDefinitionSchema } from '@baton/contracts';
import { meshDecider, meshEntryHandoffId, meshHandoffId, type MeshCommand, type MeshView } from '@baton/domain';
import type { TimelineEntry } from '@baton/projections';
import { startFixture, thrashMesh, type NotifierFixture } from '../web/console-fixture.int-support';

/**
 * The mesh run view (issue 14) through the API and the web: turns, handoffs taken, calls ignored
 * and why, the cap, the outcome — read from the events stream (no projection holds meshes);
 * project routes, the id-only route with the `ambiguous_id` rule of the run routes, the page, and
 * the link from the inbox's mesh stop item.
 */

let fx: NotifierFixture;
let viewer: string;
let both: string;
let outsider: string;
let thrashPacket: string;

const claimOf = (handoffId: string, agent: string) => ({
  handoff_id: handoffId,
  claim_id: `c-${handoffId}`,
  handoff: { handoff_id: handoffId, status: 'claimed' as const, claim: { claim_id: `c-${handoffId}`, claimed_by: agent } },
});

/** triage → billing (ignoring an unknown tool and a self-handoff on the way) → triage, who ends it with the output. */
async function completedMesh(project: string, id: string): Promise<void> {
  const now = new Date(Date.UTC(2026, 1, 1, 9, 0)).toISOString();
  const mesh = MeshDefinitionSchema.parse({
    name: 'support',
    entry: 'triage',
    handoffs: { triage: ['billing'], billing: ['triage'] },
    outputs: ['triage'],
    max_iterations: 5,
  });
  const commands: MeshCommand[] = [
    {
      type: 'start_mesh',
      data: { mesh_run_id: id, project, mesh, agents: ['triage', 'billing'], input: 'I was charged twice', started_by: 'sam' },
      metadata: { now, actor: 'sam' },
    },
    {
      type: 'record_turn',
      data: {
        result_id: `${id}-r1`,
        run_id: `${id}-a1`,
        agent: 'triage',
        text: 'Billing can help with that.',
        handoff_tool_calls: [
          { tool: 'handoff_to_legal' },
          { tool: handoffToolName('triage') },
          { tool: handoffToolName('billing'), arguments: { reason: 'a double charge', message: '<b>card 4242</b>' } },
        ],
        ...claimOf(meshEntryHandoffId(id), 'triage'),
      },
      metadata: { now, actor: 'triage' },
    },
    {
      type: 'record_turn',
      data: {
        result_id: `${id}-r2`,
        run_id: `${id}-a2`,
        agent: 'billing',
        text: 'Refunded the second charge.',
        handoff_tool_calls: [{ tool: handoffToolName('triage') }],
        ...claimOf(meshHandoffId(id, `${id}-r1`), 'billing'),
      },
      metadata: { now, actor: 'billing' },
    },
    {
      type: 'record_turn',
      data: {
        result_id: `${id}-r3`,
        run_id: `${id}-a3`,
        agent: 'triage',
        text: 'Your refund is on its way.',
        handoff_tool_calls: [],
        ...claimOf(meshHandoffId(id, `${id}-r2`), 'triage'),
      },
      metadata: { now, actor: 'triage' },
    },
  ];
  for (const command of commands) {
    const result = await fx.events.handleCommand({ project, kind: 'mesh', id }, meshDecider, command, {
      commandId: `cmd-${randomBytes(4).toString('hex')}`,
      occurredAt: now,
      actor: command.metadata.actor,
      origin: 'agent',
      causationId: null,
      correlationId: id,
    });
    if (!result.ok) throw new Error(`${command.type}: ${result.error.code}`);
  }
}

interface MeshReply {
  project: string;
  mesh: MeshView;
  timeline: TimelineEntry[];
  error?: { code: string; message: string; details?: Record<string, unknown> };
}

async function get(path: string, token: string): Promise<{ status: number; body: MeshReply }> {
  const response = await fetch(`${fx.base}${path}`, { headers: { authorization: `Bearer ${token}` } });
  return { status: response.status, body: (await response.json()) as MeshReply };
}

async function signIn(bearer: string): Promise<string> {
  const page = await fetch(`${fx.base}/login`);
  const csrf = /name="_csrf" value="([^"]+)"/.exec(await page.text())![1]!;
  const cookie = page.headers.get('set-cookie')!.split(';')[0]!;
  const done = await fetch(`${fx.base}/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
    body: new URLSearchParams({ _csrf: csrf, token: bearer, next: '/inbox' }).toString(),
    redirect: 'manual',
  });
  return done.headers
    .getSetCookie()
    .find((c) => c.startsWith('baton_session='))!
    .split(';')[0]!;
}

beforeAll(async () => {
  fx = await startFixture();
  viewer = await fx.token('vera', 'viewer', ['shop']);
  both = await fx.token('olga', 'operator', ['shop', 'outlet']);
  outsider = await fx.token('otto', 'viewer', ['elsewhere']);
  await completedMesh('shop', 'm-done');
  await completedMesh('outlet', 'm-done');
  thrashPacket = await thrashMesh(fx.events, 'shop', 'm-loop');
  await fx.caughtUp();
}, 30_000);

afterAll(async () => {
  await fx?.close();
});

describe('GET /v1/projects/:project/meshes/:id and /v1/meshes/:id (real NATS and Redis)', () => {
  it('a completed mesh: every turn with what was said and the calls made, the handoffs taken, the calls ignored and why, the cap, the outcome with its output; and its timeline', async () => {
    const { status, body } = await get('/v1/projects/shop/meshes/m-done', viewer);
    expect(status).toBe(200);
    const mesh = body.mesh;
    expect(body.project).toBe('shop');
    expect(mesh).toMatchObject({ mesh_run_id: 'm-done', project: 'shop', status: 'completed', input: 'I was charged twice', started_by: 'sam' });
    expect(mesh.turns.map((t) => [t.turn, t.agent, t.text, t.calls])).toEqual([
      [1, 'triage', 'Billing can help with that.', ['handoff_to_legal', 'handoff_to_triage', 'handoff_to_billing']],
      [2, 'billing', 'Refunded the second charge.', ['handoff_to_triage']],
      [3, 'triage', 'Your refund is on its way.', []],
    ]);
    expect(mesh.handoffs.map((h) => [h.turn, h.from, h.to, h.tool, h.handover ?? null])).toEqual([
      [2, 'triage', 'billing', 'handoff_to_billing', { reason: 'a double charge', message: '<b>card 4242</b>' }],
      [3, 'billing', 'triage', 'handoff_to_triage', null],
    ]);
    expect(mesh.ignored.map((i) => [i.turn, i.agent, i.tool, i.target, i.reason])).toEqual([
      [1, 'triage', 'handoff_to_legal', null, 'unknown_tool'],
      [1, 'triage', 'handoff_to_triage', 'triage', 'not_granted'],
    ]);
    expect(mesh.cap).toEqual({ max_iterations: 5, initial: 5, used: 3, raised: [] });
    expect(mesh.outcome).toMatchObject({
      status: 'completed',
      by: 'triage',
      turns: 3,
      output: { agent: 'triage', turn: 3, text: 'Your refund is on its way.' },
    });
    expect(body.timeline.map((e) => e.type)).toEqual([
      'mesh.started',
      'mesh.turn_recorded',
      'mesh.handoff_ignored',
      'mesh.handoff_ignored',
      'mesh.handed_off',
      'mesh.turn_recorded',
      'mesh.handed_off',
      'mesh.turn_recorded',
      'mesh.completed',
    ]);
    expect(body.timeline[1]).toMatchObject({ said: 'Billing can help with that.', summary: expect.stringContaining('handoff_to_billing') });
  });

  it('a mesh stopped at its cap: the stop (open packet, the refused handoff) and the cap used', async () => {
    const { body } = await get('/v1/projects/shop/meshes/m-loop', viewer);
    expect(body.mesh).toMatchObject({
      status: 'stopped',
      cap: { max_iterations: 2, used: 2 },
      stop: { packet_id: thrashPacket, why: 'thrash', status: 'open', refused: { from: 'billing', to: 'triage' } },
      outcome: { status: 'stopped', packet_id: thrashPacket, why: 'thrash', at_cap: true },
      notices: 1,
    });
  });

  it('the id-only route follows the run routes: one visible project → it; several → 409 ambiguous_id naming them; none → 404; another project is 404 like a missing mesh', async () => {
    expect((await get('/v1/meshes/m-done', viewer)).body.project).toBe('shop');
    const ambiguous = await get('/v1/meshes/m-done', both);
    expect(ambiguous.status).toBe(409);
    expect(ambiguous.body.error).toMatchObject({ code: 'ambiguous_id', details: { kind: 'mesh', id: 'm-done', projects: ['outlet', 'shop'] } });
    expect(ambiguous.body.error?.message).toContain('/v1/projects/outlet/meshes/m-done');
    expect((await get('/v1/projects/outlet/meshes/m-done', both)).body.mesh).toMatchObject({ project: 'outlet', status: 'completed' });
    expect((await get('/v1/meshes/m-loop', both)).body.project).toBe('shop');
    expect((await get('/v1/meshes/m-none', both)).status).toBe(404);
    expect((await get('/v1/meshes/m-done', outsider)).status).toBe(404);
    expect((await get('/v1/projects/outlet/meshes/m-done', viewer)).status).toBe(404);
    expect((await get('/v1/projects/shop/meshes/bad.id', viewer)).status).toBe(400);
  });

  it('the OpenAPI document has the mesh routes', async () => {
    const doc = (await (await fetch(`${fx.base}/openapi.json`)).json()) as { paths: Record<string, unknown> };
    expect(doc.paths['/v1/projects/{project}/meshes/{id}']).toBeDefined();
    expect(doc.paths['/v1/meshes/{id}']).toBeDefined();
  });
});

describe('the mesh page, linked from the inbox', () => {
  it("the inbox's mesh stop item links to the mesh page; the page shows the outcome, the cap, the turns, the handoffs and the ignored calls with why", async () => {
    const cookie = await signIn(viewer);
    const inbox = await (await fetch(`${fx.base}/inbox`, { headers: { cookie } })).text();
    expect(inbox).toContain('href="/projects/shop/meshes/m-loop" data-testid="mesh-link"');
    expect(inbox).not.toContain('/projects/shop/runs/m-loop');

    const stopped = await (await fetch(`${fx.base}/projects/shop/meshes/m-loop`, { headers: { cookie } })).text();
    expect(stopped).toMatch(/data-testid="mesh-status">stopped</);
    expect(stopped).toMatch(/data-testid="mesh-cap">2 of 2 turns used</);
    expect(stopped).toContain(thrashPacket);

    const done = await fetch(`${fx.base}/projects/shop/meshes/m-done`, { headers: { cookie } });
    expect(done.status).toBe(200);
    const page = await done.text();
    expect(page).toMatch(/data-testid="mesh-outcome">completed by triage after 3 turns/);
    expect(page).toMatch(/data-testid="mesh-ignored-call" data-reason="unknown_tool"><td>1<\/td><td>triage<\/td><td>handoff_to_legal<\/td>/);
    expect(page).toMatch(/data-testid="mesh-ignored-call" data-reason="not_granted"><td>1<\/td><td>triage<\/td><td>handoff_to_triage<\/td>/);
    expect((page.match(/data-testid="mesh-turn"/g) ?? []).length).toBe(3);
    expect((page.match(/data-testid="mesh-handoff"/g) ?? []).length).toBe(2);
    // What triage wrote for billing, as text (an agent's words are never markup).
    expect(page).toContain('<td data-testid="mesh-handover">reason: a double charge; message: &lt;b&gt;card 4242&lt;/b&gt;</td>');

    const byId = await fetch(`${fx.base}/meshes/m-done`, { headers: { cookie }, redirect: 'manual' });
    expect([byId.status, byId.headers.get('location')]).toEqual([303, '/projects/shop/meshes/m-done']);
    expect((await fetch(`${fx.base}/projects/outlet/meshes/m-done`, { headers: { cookie } })).status).toBe(404);
  });
});
