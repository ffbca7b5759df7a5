import { Subjects } from '@baton/contracts';
import { DeadLetterReason } from '@baton/eventstore';
import { durableNameFor } from '@baton/platform';
import { waitFor } from '@baton/wait';
import { loadRouterConfig } from './config';
import { refusalFixture } from './int/refusals';

/*
 * What a run's OWN agent can write onto its run once the run waits for no result: before, every
 * refused result of the agent the run waited for was recorded (`run.result_rejected`), on a run
 * that had stopped or ended too — that agent could append events to its own stopped or finished run
 * for ever (and to every run it ever worked on). Now such a run records at most
 * ROUTER_FOREIGN_REFUSALS_PER_RUN of them per agent (counted in the run's events, the same for
 * every router instance); the rest are dead-lettered `idle_refusals_spent` under the sender's
 * letter budget, then summed up: each still recorded somewhere, none lost.
 */

/** The sender's budget of letters a minute (BATON_REFUSED_LETTERS_PER_MINUTE). */
const LETTERS = 4;
const SPAM = 20;
const encoder = new TextEncoder();

describe('router: what a run`s own agent can write onto its run once it waits for no result is capped (real NATS)', () => {
  const CAP = loadRouterConfig({}).ROUTER_FOREIGN_REFUSALS_PER_RUN;
  const fx = refusalFixture({ tag: 'i', letters: LETTERS });
  const { runEvents, startRun, publishResult, settled, lettersOf, counted } = fx;

  it('a stopped run records the cap of its own agent`s refused results; the rest are dead-lettered idle_refusals_spent, summed up past the letter budget', async () => {
    expect(CAP).toBe(3);
    const run = 'wr-stopped';
    await startRun(run);
    await fx.nats.js.publish(
      Subjects.stopRequest(fx.prefix, 'acme'),
      encoder.encode(
        JSON.stringify({ workflow_run_id: run, project: 'acme', packet_id: `wd-${run}`, why: 'circuit_open', tried: [], requested_by: 'baton-watchdog' }),
      ),
    );
    await waitFor(async () => ((await runEvents(run)).some((e) => e.type === 'run.stopped') ? true : undefined), 'the run stopped');
    const before = (await runEvents(run)).length;

    // The run's own agent (coder) keeps sending results to its stopped run.
    const seqs: number[] = [];
    for (let i = 0; i < SPAM; i++) seqs.push(await publishResult('coder', run, `late-${i}`));
    const resultsDurable = durableNameFor('router', '{prefix}.in.*.result.*');
    await settled(Math.max(...seqs));

    const events = await runEvents(run);
    const rejected = events.filter((e) => e.type === 'run.result_rejected').map((e) => e.payload as { agent: string; result_id: string; code: string });
    expect(rejected.map((r) => [r.agent, r.result_id, r.code])).toEqual(Array.from({ length: CAP }, (_, i) => ['coder', `late-${i}`, 'run_not_running']));
    expect(events.length).toBe(before + CAP);

    const letters = await lettersOf('coder');
    expect(letters.map((l) => l.reason)).toEqual(Array(LETTERS).fill('idle_refusals_spent'));
    expect(letters[0]!.detail).toContain(`result late-${CAP} of 'coder' refused (run_not_running:`);
    expect(letters[0]!.detail).toContain(`not recorded on run ${run}, which is stopped`);
    const metrics = fx.deployment.service('router').metrics;
    expect(await counted(metrics, 'baton_dead_letters_total', { source: 'router-results', reason: 'idle_refusals_spent' })).toBe(LETTERS);
    expect(await counted(metrics, 'baton_events_handled_total', { consumer: resultsDurable, outcome: 'suppressed' })).toBe(SPAM - CAP - LETTERS);

    // Stopping writes the sender's summary: every acknowledged result is on the run, in a letter, or in the summary.
    await fx.deployment.stop('router');
    const all = await lettersOf('coder');
    expect(all).toHaveLength(LETTERS + 1);
    expect(all[LETTERS]).toMatchObject({
      reason: DeadLetterReason.refusalsSuppressed,
      body: { sender: 'acme/coder', suppressed: SPAM - CAP - LETTERS, reasons: { idle_refusals_spent: SPAM - CAP - LETTERS } },
    });
  }, 90_000);
});
