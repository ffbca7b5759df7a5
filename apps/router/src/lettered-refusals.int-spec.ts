import { Subjects } from '@baton/contracts';
import { createBatonClient, type BatonAgent, type ResultRefusal } from '@baton/sdk';
import { waitFor } from '@baton/wait';
import { loadRouterConfig } from './config';
import { refusalFixture } from './int/refusals';
import { sleep } from './int/support';

/*
 * An agent is told of its results the router dead-letters instead of refusing on their run (an
 * SDK audit, LOW-2: a result naming a run that does not exist resolved `{ seq }`, and
 * `onResultRefused` never fired: the only trace was a `not_found` letter). Now the router says
 * those on the agent's `<agent inbox>.refused` too — `not_found`, `foreign_refusals_spent`,
 * `idle_refusals_spent` — once the result's own letter is stored, so under the sender's budget of
 * letters: past it the result is only counted in the sender's summary, and nothing is said.
 */

/** The sender's budget of letters a minute (BATON_REFUSED_LETTERS_PER_MINUTE). */
const LETTERS = 3;
const P = 'acme';
const encoder = new TextEncoder();

describe('router: an agent hears of its results dead-lettered instead of refused on a run, under its budget of letters (SDK, real NATS)', () => {
  const CAP = loadRouterConfig({}).ROUTER_FOREIGN_REFUSALS_PER_RUN;
  const fx = refusalFixture({ tag: 'l', letters: LETTERS, helper: true });
  const { runEvents, startRun, settled } = fx;
  const agents: BatonAgent[] = [];
  const heard: Record<'coder' | 'reviewer' | 'helper', ResultRefusal[]> = { coder: [], reviewer: [], helper: [] };
  let coder: BatonAgent;
  let reviewer: BatonAgent;
  let helper: BatonAgent;

  beforeAll(async () => {
    const client = async (agent: keyof typeof heard) => {
      const made = await createBatonClient({
        nats: fx.nats,
        prefix: fx.prefix,
        project: P,
        agent,
        onResultRefused: (refusal) => void heard[agent].push(refusal),
      });
      agents.push(made);
      return made;
    };
    coder = await client('coder');
    reviewer = await client('reviewer');
    helper = await client('helper');
  }, 30_000);

  fx.beforeClose(async () => {
    for (const agent of agents) await agent.close();
  });

  /** `agent`'s result `id` naming run `run` and its entry handoff, under a claim it does not hold: the inbox sequence it is stored at. */
  const publish = async (agent: BatonAgent, run: string, id: string) =>
    (await agent.publishResult({ result_id: id, run_id: `ar-${id}`, workflow_run_id: run, handoff_id: `ho-s-${run}`, claim_id: `claim-${id}`, body: 'done' }))
      .seq;

  /** The letters of `agent`'s results: reason and the inbox sequence of the result, oldest first. */
  const lettersOf = async (agent: string) => (await fx.lettersOf(agent)).map((letter) => ({ reason: letter.reason, seq: letter.seq }));

  it('a result naming a run that does not exist is dead-lettered not_found and the agent hears it: onResultRefused, code not_found, seq the letter`s', async () => {
    const seq = await publish(coder, 'wr-ghost', 'res-ghost');
    const told = await waitFor(() => heard.coder.find((r) => r.result_id === 'res-ghost'), 'coder told its result naming no run was refused');
    expect(told).toEqual({
      project: P,
      agent: 'coder',
      of: 'result',
      workflow_run_id: 'wr-ghost',
      result_id: 'res-ghost',
      handoff_id: 'ho-s-wr-ghost',
      claim_id: 'claim-res-ghost',
      code: 'not_found',
      seq,
      at: expect.any(String),
      publishedHere: true,
    });
    expect(await lettersOf('coder')).toEqual([{ reason: 'not_found', seq }]);
    await settled(seq);
    await sleep(300);
    expect(heard.coder.filter((r) => r.result_id === 'res-ghost')).toHaveLength(1);
    expect(heard.reviewer).toEqual([]);
    expect(heard.helper).toEqual([]);
  }, 30_000);

  it('a flood of results naming runs that do not exist is no flood of notices: one per letter of its own, none past the sender`s budget', async () => {
    const seqs: number[] = [];
    for (let i = 0; i < 10; i++) seqs.push(await publish(helper, `wr-made-up-${i}`, `res-made-up-${i}`));
    await settled(Math.max(...seqs));
    const letters = await lettersOf('helper');
    expect(letters.map((l) => l.reason)).toEqual(Array(LETTERS).fill('not_found'));
    await waitFor(() => (heard.helper.length >= LETTERS ? true : undefined), 'helper told of its lettered results');
    await sleep(500);
    // Exactly the results that have a letter of their own; the rest are counted in the sender's summary, unsaid.
    expect(heard.helper.map((r) => [r.code, r.seq]).sort((a, b) => Number(a[1]) - Number(b[1]))).toEqual(letters.map((l) => ['not_found', l.seq]));
    expect(heard.coder.map((r) => r.result_id)).toEqual(['res-ghost']);
  }, 60_000);

  it('results past the run`s cap of an agent it does not wait for (foreign_refusals_spent), and of its own agent once it waits for none (idle_refusals_spent), are said too', async () => {
    expect(CAP).toBe(3);
    const run = 'wr-busy';
    await startRun(run);

    // reviewer: the run waits for coder. The cap's refusals are recorded on the run (the dispatch
    // reactor says them, unexpected_agent); the next are dead-lettered and said from their letters.
    const foreign: number[] = [];
    for (let i = 0; i < CAP + 2; i++) foreign.push(await publish(reviewer, run, `res-foreign-${i}`));
    await settled(Math.max(...foreign));
    await waitFor(() => (heard.reviewer.length >= CAP + 2 ? true : undefined), 'reviewer told of each refusal');
    expect(heard.reviewer.map((r) => [r.result_id, r.code]).sort()).toEqual([
      ...Array.from({ length: CAP }, (_, i) => [`res-foreign-${i}`, 'unexpected_agent']),
      [`res-foreign-${CAP}`, 'foreign_refusals_spent'],
      [`res-foreign-${CAP + 1}`, 'foreign_refusals_spent'],
    ]);
    expect(heard.reviewer.filter((r) => r.code === 'foreign_refusals_spent').map((r) => r.seq)).toEqual(foreign.slice(CAP));

    // The run stops; its own agent (coder) keeps sending results to it.
    await fx.nats.js.publish(
      Subjects.stopRequest(fx.prefix, P),
      encoder.encode(
        JSON.stringify({ workflow_run_id: run, project: P, packet_id: `wd-${run}`, why: 'circuit_open', tried: [], requested_by: 'baton-watchdog' }),
      ),
    );
    await waitFor(async () => ((await runEvents(run)).some((e) => e.type === 'run.stopped') ? true : undefined), 'the run stopped');
    const idle: number[] = [];
    for (let i = 0; i < CAP + 1; i++) idle.push(await publish(coder, run, `res-idle-${i}`));
    await settled(Math.max(...idle));
    const told = await waitFor(() => heard.coder.find((r) => r.code === 'idle_refusals_spent'), 'coder told its result past the cap was refused');
    expect(told).toEqual({
      project: P,
      agent: 'coder',
      of: 'result',
      workflow_run_id: run,
      result_id: `res-idle-${CAP}`,
      handoff_id: `ho-s-${run}`,
      claim_id: `claim-res-idle-${CAP}`,
      code: 'idle_refusals_spent',
      seq: idle[CAP],
      at: expect.any(String),
      publishedHere: true,
    });
    expect((await lettersOf('reviewer')).map((l) => l.reason)).toEqual(['foreign_refusals_spent', 'foreign_refusals_spent']);
    expect((await lettersOf('coder')).map((l) => l.reason)).toEqual(['not_found', 'idle_refusals_spent']);
  }, 60_000);
});
