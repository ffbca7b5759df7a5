import { Subjects } from '@baton/contracts';
import { batonStreamNames, DlqHeader } from '@baton/eventstore';
import { durableNameFor } from '@baton/platform';
import { createBatonClient, publishMeshResult, startMesh, type BatonAgent, type ResultRefusal } from '@baton/sdk';
import { waitFor } from '@baton/wait';
import { publishDefinition, sleep, startInProcess, type InProcessDeployment } from './int/support';

/*
 * An agent is told of its mesh turns the router dead-letters because they name a mesh run that
 * does not exist (docs/runs.md rule 3c). Before, such a turn only got a `not_found` letter: the
 * publish resolved `{ seq }` and `onResultRefused` never fired. Now the router says it on the
 * agent's `<agent inbox>.refused` (`of: turn`) once the turn's own letter is stored, so under the
 * sender's budget of letters: past it the turn is only counted in the sender's summary, and nothing
 * is said.
 */

/** The sender's budget of letters a minute (BATON_REFUSED_LETTERS_PER_MINUTE). */
const LETTERS = 3;
const P = 'acme';
const definition = {
  project: P,
  agents: [
    { name: 'triage', role: 'Front desk' },
    { name: 'billing', role: 'Billing specialist' },
    { name: 'tech', role: 'Technical support' },
  ],
  workflows: [],
  meshes: [
    {
      name: 'support',
      entry: 'triage',
      handoffs: { triage: ['billing', 'tech'], billing: ['triage'], tech: ['triage'] },
      outputs: ['triage'],
      max_iterations: 4,
    },
  ],
};

describe('router: an agent hears of its mesh turns naming no mesh run, under its budget of letters (SDK, real NATS)', () => {
  let deployment: InProcessDeployment;
  const agents: BatonAgent[] = [];
  const heard: Record<'triage' | 'billing' | 'tech', ResultRefusal[]> = { triage: [], billing: [], tech: [] };
  let triage: BatonAgent;
  let billing: BatonAgent;
  let tech: BatonAgent;

  beforeAll(async () => {
    deployment = await startInProcess({ tag: 'lm', services: ['router'], env: { BATON_REFUSED_LETTERS_PER_MINUTE: String(LETTERS) } });
    const client = async (agent: keyof typeof heard) => {
      const made = await createBatonClient({
        nats: deployment.nats,
        prefix: deployment.prefix,
        project: P,
        agent,
        onResultRefused: (refusal) => void heard[agent].push(refusal),
      });
      agents.push(made);
      return made;
    };
    triage = await client('triage');
    billing = await client('billing');
    tech = await client('tech');
    expect(await publishDefinition(deployment.nats, deployment.prefix, P, definition)).toMatchObject({ ok: true });
  }, 30_000);

  afterAll(async () => {
    for (const agent of agents) await agent.close();
    await deployment?.close();
  }, 20_000);

  /** `agent`'s turn `id` naming mesh run `mesh` and a handoff and claim of it: the inbox sequence it is stored at. */
  const publish = async (agent: BatonAgent, name: string, mesh: string, id: string) =>
    (
      await publishMeshResult(agent.meshPublisher(), {
        project: P,
        mesh_run_id: mesh,
        agent: name,
        result_id: id,
        text: 'done',
        handoff_id: `mh-s-${mesh}`,
        claim_id: `claim-${id}`,
      })
    ).seq;

  /** Wait until the router's mesh turns consumer has settled every inbox message up to `seq`. */
  const settled = (seq: number) =>
    waitFor(async () => {
      const info = await deployment.nats.jsm.consumers.info(batonStreamNames(deployment.prefix).inbox, durableNameFor('router', '{prefix}.in.*.mesh_result.*'));
      return info.num_pending === 0 && info.num_ack_pending === 0 && info.delivered.stream_seq >= seq ? true : undefined;
    }, 'the mesh turns consumer to settle every turn');

  /** The letters of `agent`'s mesh turns: reason and the inbox sequence of the turn, oldest first. */
  const lettersOf = async (agent: string) => {
    const { nats, prefix } = deployment;
    const stream = batonStreamNames(prefix).dlq;
    const info = await nats.jsm.streams.info(stream);
    const out: Array<{ reason: string; seq: number }> = [];
    for (let seq = info.state.first_seq; info.state.messages > 0 && seq <= info.state.last_seq; seq++) {
      const msg = await nats.jsm.streams.getMessage(stream, { seq }).catch(() => null);
      if (msg === null || msg.header.get(DlqHeader.subject) !== Subjects.meshResult(prefix, P, agent)) continue;
      out.push({ reason: msg.header.get(DlqHeader.reason), seq: Number(msg.header.get(DlqHeader.seq)) });
    }
    return out;
  };

  it('a mesh turn naming a mesh run that does not exist is dead-lettered not_found and the agent hears it: onResultRefused, of turn, code not_found, seq the letter`s', async () => {
    const seq = await publish(triage, 'triage', 'mesh-ghost', 'turn-ghost');
    const told = await waitFor(() => heard.triage.find((r) => r.result_id === 'turn-ghost'), 'triage told its turn naming no mesh run was refused');
    expect(told).toEqual({
      project: P,
      agent: 'triage',
      of: 'turn',
      workflow_run_id: 'mesh-ghost',
      result_id: 'turn-ghost',
      handoff_id: 'mh-s-mesh-ghost',
      claim_id: 'claim-turn-ghost',
      code: 'not_found',
      seq,
      at: expect.any(String),
      publishedHere: true,
    });
    expect(await lettersOf('triage')).toEqual([{ reason: 'not_found', seq }]);
    await settled(seq);
    await sleep(300);
    expect(heard.triage.filter((r) => r.result_id === 'turn-ghost')).toHaveLength(1);
    expect(heard.billing).toEqual([]);
  }, 30_000);

  it('a flood of mesh turns naming mesh runs that do not exist is no flood of notices: one per letter of its own, none past the sender`s budget', async () => {
    const seqs: number[] = [];
    for (let i = 0; i < 10; i++) seqs.push(await publish(billing, 'billing', `mesh-made-up-${i}`, `turn-made-up-${i}`));
    await settled(Math.max(...seqs));
    const letters = await lettersOf('billing');
    expect(letters.map((l) => l.reason)).toEqual(Array(LETTERS).fill('not_found'));
    await waitFor(() => (heard.billing.length >= LETTERS ? true : undefined), 'billing told of its lettered turns');
    await sleep(500);
    // Exactly the turns that have a letter of their own; the rest are counted in the sender's summary, unsaid.
    expect(heard.billing.map((r) => [r.of, r.code, r.seq]).sort((a, b) => Number(a[2]) - Number(b[2]))).toEqual(
      letters.map((l) => ['turn', 'not_found', l.seq]),
    );
    expect(heard.triage.map((r) => r.result_id)).toEqual(['turn-ghost']);
  }, 60_000);

  it('a turn naming a mesh run that exists, refused on it, is said once (by the mesh reactor) and has no letter', async () => {
    const mesh = 'mesh-real';
    await startMesh(
      { js: deployment.nats.js, prefix: deployment.prefix },
      { mesh_run_id: mesh, project: P, mesh: 'support', input: 'charged twice', started_by: 'sam' },
    );
    await waitFor(
      async () => ((await deployment.store.read({ project: P, kind: 'mesh', id: mesh })).events.some((e) => e.type === 'mesh.started') ? true : undefined),
      'the mesh started',
    );
    // tech speaks out of turn (triage's is the first): refused on the mesh, mesh.turn_rejected.
    const seq = await publish(tech, 'tech', mesh, 'turn-out-of-turn');
    const told = await waitFor(() => heard.tech.find((r) => r.result_id === 'turn-out-of-turn'), 'tech told its turn was refused');
    expect(told).toMatchObject({ of: 'turn', workflow_run_id: mesh, result_id: 'turn-out-of-turn' });
    expect(told.code).not.toBe('not_found');
    await settled(seq);
    await sleep(500);
    expect(heard.tech).toHaveLength(1);
    expect(await lettersOf('tech')).toEqual([]);
  }, 30_000);
});
