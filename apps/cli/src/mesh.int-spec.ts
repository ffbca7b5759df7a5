import { randomBytes } from 'node:crypto';
import { createEventRegistry, handoffToolName, MeshDefinitionSchema } from '@baton/contracts';
import { meshDecider, meshEntryHandoffId, meshHandoffId, type MeshCommand } from '@baton/domain';
import { JetStreamEventStore, batonStreamNames, batonTopology, connectNats, provision, type NatsHandle } from '@baton/eventstore';
import { main } from './main';
import { bufferedIo } from './output';

/**
 * `baton mesh <id>` (issue 14): a handoff mesh run read from the events stream — turns, handoffs
 * taken, calls ignored and why, the cap and the outcome; `--project` when several projects hold the id.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const NOW = '2026-02-01T09:00:00.000Z';

const claimOf = (handoffId: string, agent: string) => ({
  handoff_id: handoffId,
  claim_id: `c-${handoffId}`,
  handoff: { handoff_id: handoffId, status: 'claimed' as const, claim: { claim_id: `c-${handoffId}`, claimed_by: agent } },
});

describe('baton mesh (real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;

  async function baton(...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, { io, env: { NATS_URL, REDIS_URL, BATON_PREFIX: prefix } });
    return { code, out: io.out(), err: io.err() };
  }

  /** triage → billing (an unknown tool and a self-handoff ignored) → triage at the cap of `cap` turns. */
  async function mesh(project: string, id: string, cap: number): Promise<void> {
    const store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    const definition = MeshDefinitionSchema.parse({
      name: 'support',
      entry: 'triage',
      handoffs: { triage: ['billing'], billing: ['triage'] },
      outputs: ['triage'],
      max_iterations: cap,
    });
    const commands: MeshCommand[] = [
      {
        type: 'start_mesh',
        data: { mesh_run_id: id, project, mesh: definition, agents: ['triage', 'billing'], input: 'charged twice', started_by: 'sam' },
        metadata: { now: NOW, actor: 'sam' },
      },
      {
        type: 'record_turn',
        data: {
          result_id: `${id}-r1`,
          run_id: `${id}-a1`,
          agent: 'triage',
          text: 'Over to billing.',
          handoff_tool_calls: [
            { tool: 'handoff_to_legal' },
            { tool: handoffToolName('triage') },
            { tool: handoffToolName('billing'), arguments: { reason: 'a double charge', message: 'card 4242' } },
          ],
          ...claimOf(meshEntryHandoffId(id), 'triage'),
        },
        metadata: { now: NOW, actor: 'triage' },
      },
      {
        type: 'record_turn',
        data: {
          result_id: `${id}-r2`,
          run_id: `${id}-a2`,
          agent: 'billing',
          text: 'Refunded.',
          handoff_tool_calls: [{ tool: handoffToolName('triage') }],
          ...claimOf(meshHandoffId(id, `${id}-r1`), 'billing'),
        },
        metadata: { now: NOW, actor: 'billing' },
      },
      {
        type: 'record_turn',
        data: {
          result_id: `${id}-r3`,
          run_id: `${id}-a3`,
          agent: 'triage',
          text: 'All done.',
          handoff_tool_calls: [],
          ...claimOf(meshHandoffId(id, `${id}-r2`), 'triage'),
        },
        metadata: { now: NOW, actor: 'triage' },
      },
    ];
    for (const command of commands) {
      const result = await store.handleCommand({ project, kind: 'mesh', id }, meshDecider, command, {
        commandId: `cmd-${randomBytes(4).toString('hex')}`,
        occurredAt: NOW,
        actor: command.metadata.actor,
        origin: 'agent',
        causationId: null,
        correlationId: id,
      });
      if (!result.ok) throw new Error(`${command.type}: ${result.error.code}`);
    }
  }

  beforeAll(async () => {
    prefix = `t${randomBytes(5).toString('hex')}`;
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
    await mesh('shop', 'm-1', 5);
    await mesh('outlet', 'm-1', 5);
    await mesh('shop', 'm-2', 5);
  });

  afterAll(async () => {
    const names = batonStreamNames(prefix);
    for (const stream of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(stream).catch(() => undefined);
    await nats.close();
  });

  it('prints the outcome, the cap, the turns with their calls, the handoffs taken and the calls ignored with why', async () => {
    const shown = await baton('mesh', 'm-2');
    expect(shown).toMatchObject({ code: 0, err: '' });
    expect(shown.out).toMatch(/outcome: +completed by triage after 3 turns; output from triage \(turn 3\)/);
    expect(shown.out).toMatch(/cap: +3 of 5 turns used/);
    expect(shown.out).toContain('Output (triage, turn 3):\n  All done.');
    expect(shown.out).toMatch(
      /Turns:\nTURN +AGENT +HANDOFF CALLS +SAID\n1 +triage +handoff_to_legal, handoff_to_triage, handoff_to_billing +Over to billing\./,
    );
    expect(shown.out).toMatch(
      /Handoffs taken:\nTURN +FROM +TO +TOOL +HANDOFF +HANDOVER\n2 +triage +billing +handoff_to_billing +\S+ +reason: a double charge; message: card 4242\n/,
    );
    expect(shown.out).toMatch(/Calls ignored:\nTURN +AGENT +TOOL +WHY +DETAIL\n1 +triage +handoff_to_legal +unknown_tool/);
    expect(shown.out).toMatch(/1 +triage +handoff_to_triage +not_granted/);
    expect(shown.out).toContain('mesh.handoff_ignored');
  });

  it('an id two projects hold needs --project (the usage error names them); --json gives { project, mesh, timeline }; an unknown id exits 1', async () => {
    const ambiguous = await baton('mesh', 'm-1');
    expect(ambiguous.code).toBe(2);
    expect(ambiguous.err).toContain('exists in projects outlet, shop');
    // With --json: typed ambiguous_id naming the projects, as answer and decide report it.
    const typed = await baton('mesh', 'm-1', '--json');
    expect(typed.code).toBe(2);
    expect(JSON.parse(typed.err)).toEqual({
      error: {
        code: 'ambiguous_id',
        message: expect.stringContaining('exists in projects outlet, shop'),
        issues: [],
        details: { projects: ['outlet', 'shop'] },
      },
    });
    const json = JSON.parse((await baton('mesh', 'm-1', '--project', 'outlet', '--json')).out) as {
      project: string;
      mesh: { project: string; ignored: Array<{ reason: string }> };
      timeline: unknown[];
    };
    expect(json.project).toBe('outlet');
    expect(json.mesh.project).toBe('outlet');
    expect(json.mesh.ignored.map((i) => i.reason)).toEqual(['unknown_tool', 'not_granted']);
    expect(json.timeline).toHaveLength(9);
    expect((await baton('mesh', 'm-9')).code).toBe(1);
    expect((await baton('mesh', 'm-1', '--project', 'elsewhere')).code).toBe(1);
  });
});
