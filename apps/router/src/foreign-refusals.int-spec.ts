import { DeadLetterReason } from '@baton/eventstore';
import { durableNameFor } from '@baton/platform';
import { loadRouterConfig } from './config';
import { refusalFixture } from './int/refusals';

/*
 * The timeline-spam attack (security audit, finding 2): an agent publishes, on its own result
 * subject, results naming a run it has no part in. Each one passes the schema, is stored and
 * acknowledged, and is refused by the run — and before, every refusal was appended to the victim's
 * run as `run.result_rejected` (300 events in 5.6 s in the audit). Now a run records at most
 * ROUTER_FOREIGN_REFUSALS_PER_RUN refusals of an agent it does not wait for; the rest are
 * dead-lettered `foreign_refusals_spent` under the sender's letter budget (then summed up), so
 * each is still recorded and none is lost. The run's own agent's refusals are recorded as before.
 */

/** The sender's budget of letters a minute (BATON_REFUSED_LETTERS_PER_MINUTE). */
const LETTERS = 4;
const SPAM = 30;

describe('router: what an agent can write onto a run it has no part in is capped (real NATS)', () => {
  // The default: the attack is held without any setting.
  const CAP = loadRouterConfig({}).ROUTER_FOREIGN_REFUSALS_PER_RUN;
  const fx = refusalFixture({ tag: 't', letters: LETTERS });
  const { runEvents, startRun, publishResult, settled, lettersOf, counted } = fx;

  it('a flood of refused results naming another agent`s run adds at most the cap to that run; the rest are dead-lettered foreign_refusals_spent, summed up past the letter budget; the run`s own agent`s refusals are all recorded', async () => {
    expect(CAP).toBe(3);
    const run = 'wr-victim';
    await startRun(run);
    const before = (await runEvents(run)).length;

    // The attacker (reviewer: not the agent the run waits for) floods it; the run's own agent (coder) sends results it has no claim for.
    const spamSeqs: number[] = [];
    for (let i = 0; i < SPAM; i++) spamSeqs.push(await publishResult('reviewer', run, `spam-${i}`));
    let last = 0;
    for (let i = 0; i < 5; i++) last = await publishResult('coder', run, `own-${i}`);
    const resultsDurable = durableNameFor('router', '{prefix}.in.*.result.*');
    await settled(last);

    const events = await runEvents(run);
    const rejected = events.filter((e) => e.type === 'run.result_rejected').map((e) => e.payload as { agent: string; result_id: string; code: string });
    // The victim's run gained the cap of the attacker's refusals, and every one of its own agent's.
    expect(rejected.filter((r) => r.agent === 'reviewer').map((r) => [r.result_id, r.code])).toEqual(
      Array.from({ length: CAP }, (_, i) => [`spam-${i}`, 'unexpected_agent']),
    );
    expect(rejected.filter((r) => r.agent === 'coder').map((r) => r.result_id)).toEqual(['own-0', 'own-1', 'own-2', 'own-3', 'own-4']);
    expect(events.length).toBe(before + CAP + 5);
    expect(events.map((e) => e.type)).not.toContain('run.stopped');

    // The rest: typed letters under the sender's budget, then counted for its summary.
    const letters = await lettersOf('reviewer');
    expect(letters.map((l) => l.reason)).toEqual(Array(LETTERS).fill('foreign_refusals_spent'));
    expect(letters[0]!.detail).toContain(`result spam-${CAP} of 'reviewer' refused (unexpected_agent:`);
    expect(letters[0]!.detail).toContain(`not recorded on run ${run}`);
    expect(await lettersOf('coder')).toEqual([]);
    const metrics = fx.deployment.service('router').metrics;
    expect(await counted(metrics, 'baton_dead_letters_total', { source: 'router-results', reason: 'foreign_refusals_spent' })).toBe(LETTERS);
    expect(await counted(metrics, 'baton_events_handled_total', { consumer: resultsDurable, outcome: 'suppressed' })).toBe(SPAM - CAP - LETTERS);

    // Stopping writes the sender's summary: every acknowledged result is on the run, in a letter, or in the summary.
    await fx.deployment.stop('router');
    const all = await lettersOf('reviewer');
    expect(all).toHaveLength(LETTERS + 1);
    const summary = all[LETTERS]!;
    expect(summary).toMatchObject({
      reason: DeadLetterReason.refusalsSuppressed,
      body: { sender: 'acme/reviewer', suppressed: SPAM - CAP - LETTERS, reasons: { foreign_refusals_spent: SPAM - CAP - LETTERS } },
    });
    const listed = (summary.body as { stored: Array<{ sequences: string[] }> }).stored[0]!.sequences.flatMap((range) => {
      const [from, to = from] = range.split('-').map(Number);
      return Array.from({ length: to! - from! + 1 }, (_, i) => from! + i);
    });
    const lettered = all.slice(0, LETTERS).map((l) => l.seq);
    expect([...listed, ...lettered].sort((a, b) => a - b)).toEqual(spamSeqs.slice(CAP));
  }, 90_000);
});
