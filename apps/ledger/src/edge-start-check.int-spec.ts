import { EdgeRefusalReplySchema, MsgIds, type ProjectDefinition } from '@baton/contracts';
import { batonStreamNames, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { headers as natsHeaders } from 'nats';
import { EDGE_DLQ_SOURCE } from './edge/agent-edge';
import { bootLedger, connectTest, deadLetters, DlqHeader, deleteStreams, messagesOn, publishDefinition, randomPrefix } from './int/support';

// The agent edge refuses a run start whose workflow the project does not define (`unknown_workflow`),
// answered at once instead of stored, acknowledged and dead-lettered by the router; it reads the
// definition fresh before it refuses, lets a pinned version it cannot rule out through, and keeps
// the sender's later messages behind a start it is checking (real NATS, the ledger in process).

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function definitionOf(project: string, workflows: Array<{ name: string; version: number }>): ProjectDefinition {
  return {
    project,
    agents: [{ name: 'lead' }],
    workflows: workflows.map((w) => ({ ...w, entry: 'one', steps: [{ id: 'one', agent: 'lead' }] })),
    meshes: [],
  } as unknown as ProjectDefinition;
}

describe('agent edge: a run start of a workflow the project does not define is refused unknown_workflow (real NATS)', () => {
  const prefix = randomPrefix();
  const project = 'acme';
  const inbox = batonStreamNames(prefix).inbox;
  let nats: NatsHandle;
  let ledger: RunningService;

  /** Ask the edge to start `workflow` (pinning `version` when given) as agent `lead`; the reply's JSON. */
  async function start(runId: string, workflow: string, version?: number): Promise<Record<string, unknown>> {
    const hdrs = natsHeaders();
    hdrs.set('Nats-Msg-Id', MsgIds.start(project, runId));
    const body = { workflow_run_id: runId, project, workflow, started_by: 'dana', ...(version !== undefined ? { workflow_version: version } : {}) };
    const reply = await nats.connection.request(`${prefix}.edge.${project}.start.lead`, encoder.encode(JSON.stringify(body)), {
      timeout: 10_000,
      headers: hdrs,
    });
    return JSON.parse(decoder.decode(reply.data)) as Record<string, unknown>;
  }

  const storedStarts = async () =>
    (await messagesOn(nats, inbox, `${prefix}.in.${project}.start.lead`)).map((m) => (m.json() as { workflow_run_id: string }).workflow_run_id);

  beforeAll(async () => {
    nats = await connectTest('ledger-edge-start-int');
    ledger = await bootLedger(prefix, 'ledger-edge-start');
  });

  afterAll(async () => {
    await ledger?.stop();
    if (nats) {
      await deleteStreams(nats, prefix);
      await nats.close();
    }
  });

  it('a project with no definition: refused at once, typed, recorded; nothing stored', async () => {
    const reply = EdgeRefusalReplySchema.parse(await start('wr-none', 'triage'));
    expect(reply.error).toMatchObject({ code: 400, reason: 'unknown_workflow' });
    expect(reply.error.detail).toContain(`project '${project}' has no published definition`);
    expect(await storedStarts()).toEqual([]);
    const letters = await deadLetters(nats, prefix, EDGE_DLQ_SOURCE);
    expect(letters.map((l) => [l.header(DlqHeader.reason), l.header(DlqHeader.subject)])).toEqual([
      ['unknown_workflow', `${prefix}.edge.${project}.start.lead`],
    ]);
  });

  it('a definition published a moment ago counts (read fresh, not the kept copy that had none); a workflow it lacks is refused; a pinned version it lacks goes on to the router', async () => {
    await publishDefinition(nats, prefix, definitionOf(project, [{ name: 'triage', version: 2 }]));
    expect(await start('wr-1', 'triage')).toMatchObject({ stream: inbox, seq: expect.any(Number) });
    const unknown = EdgeRefusalReplySchema.parse(await start('wr-2', 'nope'));
    expect(unknown.error.reason).toBe('unknown_workflow');
    expect(unknown.error.detail).toContain(`workflow 'nope' is not defined in project '${project}'`);
    // An earlier definition may hold v1: the router, which keeps every version, decides.
    expect(await start('wr-3', 'triage', 1)).toMatchObject({ stream: inbox });
    expect(await start('wr-4', 'triage', 2)).toMatchObject({ stream: inbox });
    expect(await storedStarts()).toEqual(['wr-1', 'wr-3', 'wr-4']);
  });

  it('while a start waits on the definition read, the same sender’s next message waits behind it: stored in the order sent', async () => {
    // `review` is not in the kept copy: this start waits on a fresh read; the result sent right after must not overtake it.
    await publishDefinition(
      nats,
      prefix,
      definitionOf(project, [
        { name: 'triage', version: 2 },
        { name: 'review', version: 1 },
      ]),
    );
    const hdrs = natsHeaders();
    hdrs.set('Nats-Msg-Id', MsgIds.start(project, 'wr-5'));
    nats.connection.publish(
      `${prefix}.edge.${project}.start.lead`,
      encoder.encode(JSON.stringify({ workflow_run_id: 'wr-5', project, workflow: 'review', started_by: 'dana' })),
      { headers: hdrs },
    );
    const result = { result_id: 'r-after', run_id: 'ar-1', project, workflow_run_id: 'wr-5', agent: 'lead', produced_at: new Date().toISOString() };
    const ack = await nats.connection.request(`${prefix}.edge.${project}.result.lead`, encoder.encode(JSON.stringify(result)), { timeout: 10_000 });
    expect(JSON.parse(decoder.decode(ack.data))).toMatchObject({ stream: inbox });
    const startSeq = (await messagesOn(nats, inbox, `${prefix}.in.${project}.start.lead`)).find(
      (m) => (m.json() as { workflow_run_id: string }).workflow_run_id === 'wr-5',
    )?.seq;
    const resultSeq = (await messagesOn(nats, inbox, `${prefix}.in.${project}.result.lead`)).find(
      (m) => (m.json() as { result_id: string }).result_id === 'r-after',
    )?.seq;
    expect(startSeq).toEqual(expect.any(Number));
    expect(resultSeq).toBeGreaterThan(startSeq!);
  });
});
