import { Subjects } from '@baton/contracts';
import type { NatsHandle } from '@baton/eventstore';
import { AgentClaims, CYCLE_AGENTS, cycleResult, publishAgentResult, startCycleRun } from '@baton/testing';
import { median, nowMs, round, summarize, type LatencySummary } from './stats';

export interface GrowthOptions {
  nats: NatsHandle;
  prefix: string;
  project: string;
  /** Prior events of the long run (default 10 000). */
  longEvents: number;
  /** Prior events of each short run (default 10). */
  shortEvents: number;
  /** Decisions timed at each size. */
  samples: number;
  /** Wait until the platform has digested the fill (consumers quiet). */
  quiesce: () => Promise<boolean>;
  /**
   * Wait, before each timed decision (its claim taken), until the platform has digested the work
   * of the decision before it (consumers quiet); false when it did not within its timeout.
   */
  settle: () => Promise<boolean>;
  log: (line: string) => void;
}

export interface GrowthResult {
  short_prior_events: number;
  long_prior_events: number;
  /** result published → `run.routed` stored, at `short_prior_events`. */
  decision_short: LatencySummary;
  /** The same at `long_prior_events`. */
  decision_long: LatencySummary;
  /**
   * How fast the long run grew (decisions/s, first and last 500). Each result waits for the
   * handoff its decision dispatched and claims it (the claim rule), so this is the rate of whole
   * sequential hops (decide, ledger create, claim), not of a burst of decisions.
   */
  fill_decisions_per_s: { first: number; last: number };
  /** Timed decisions that started without the platform having gone quiet (`settle` timed out). */
  unsettled_samples: number;
}

interface Routed {
  at: number;
  agent: string;
  handoffId: string;
  causeId: string;
}

const decoder = new TextDecoder();

/**
 * Time routing decisions on a run with few prior events and on one with many. The long run is
 * grown through the router itself: results one after another (agents alternate, so each one
 * dispatches), each published under the claim its agent took on the handoff the previous one
 * dispatched (a result is accepted only under the current claim, docs/runs.md). Every timing is
 * "result published → `run.routed` for that result stored" (the claim is taken before the clock
 * starts), seen by a core subscription on the run's subject, taken one decision at a time after
 * the platform has gone quiet: each timed result is published once the consumers have digested
 * everything before it, the previous sample's dispatch, offer and projections included. Without
 * that wait every sample overlapped the tail of the one before (the other size's), and a short
 * run's tail (its handoff and projection state cold after the fill) landed on the long run's
 * sample: the ratio measured the order of the samples as much as the run's length.
 */
export async function measureGrowth(opts: GrowthOptions): Promise<GrowthResult> {
  const { nats, prefix, project } = opts;
  const tag = Date.now().toString(36);
  const routed = new Map<string, Routed[]>();
  const waiters = new Map<string, (r: Routed) => void>();
  const sub = nats.connection.subscribe(Subjects.aggregate(prefix, project, 'run', '*'), {
    callback: (err, msg) => {
      if (err) return;
      const at = nowMs();
      const envelope = JSON.parse(decoder.decode(msg.data)) as {
        type: string;
        aggregate: { id: string };
        payload: { target?: { agent: string }; handoff_id?: string; cause?: { id: string } };
      };
      if (envelope.type !== 'run.routed' || !envelope.aggregate.id.startsWith(`grow-${tag}-`)) return;
      const r: Routed = {
        at,
        agent: envelope.payload.target?.agent ?? '',
        handoffId: envelope.payload.handoff_id ?? '',
        causeId: envelope.payload.cause?.id ?? '',
      };
      const list = routed.get(envelope.aggregate.id) ?? [];
      list.push(r);
      routed.set(envelope.aggregate.id, list);
      waiters.get(`${envelope.aggregate.id}/${r.causeId}`)?.(r);
    },
  });
  const waitRouted = (runId: string, causeId: string, timeoutMs = 60_000) =>
    new Promise<Routed>((resolve, reject) => {
      const seen = routed.get(runId)?.find((r) => r.causeId === causeId);
      if (seen) return resolve(seen);
      const timer = setTimeout(() => reject(new Error(`no run.routed for ${runId}/${causeId} within ${timeoutMs} ms`)), timeoutMs);
      waiters.set(`${runId}/${causeId}`, (r) => {
        clearTimeout(timer);
        waiters.delete(`${runId}/${causeId}`);
        resolve(r);
      });
    });
  const agentFor = (n: number) => CYCLE_AGENTS[(n - 1) % CYCLE_AGENTS.length] as string;
  const agents = new AgentClaims(nats, prefix, project);
  type GrowingRun = { id: string; next: number; handoffId: string };

  /** Publish result `n` of `run` under its agent's claim on the run's current handoff; resolves its `run.routed`. */
  const hop = async (run: GrowingRun, n: number, beforePublish?: () => Promise<void>): Promise<Routed> => {
    const claimId = await agents.claim(agentFor(n), run.handoffId);
    await beforePublish?.();
    await publishAgentResult(nats, prefix, cycleResult(project, run.id, agentFor(n), n, { handoffId: run.handoffId, claimId }));
    const r = await waitRouted(run.id, `${run.id}-r${n}`);
    run.handoffId = r.handoffId;
    return r;
  };

  /** Start a run and feed it `results` results, one hop after another; resolves once the last is routed. */
  const grow = async (runId: string, results: number): Promise<{ run: GrowingRun; times: number[] }> => {
    await startCycleRun(nats, prefix, project, runId, 'bench');
    // Results for a run that has not started yet are dead-lettered (not_found): wait for its entry route.
    const entry = await waitRouted(runId, runId);
    const run: GrowingRun = { id: runId, next: results + 1, handoffId: entry.handoffId };
    for (let n = 1; n <= results; n++) await hop(run, n);
    return { run, times: (routed.get(runId) ?? []).map((r) => r.at) };
  };

  /** Time one decision: result published (once the platform is quiet) → its `run.routed` stored. */
  let unsettled = 0;
  const timeOne = async (run: GrowingRun): Promise<number> => {
    let t0 = 0;
    const r = await hop(run, run.next++, async () => {
      if (!(await opts.settle())) unsettled++;
      t0 = nowMs();
    });
    return r.at - t0;
  };

  try {
    // Events per run: run.started + run.routed, then result_recorded + routed per result.
    const shortResults = Math.max(0, Math.round((opts.shortEvents - 2) / 2));
    const longResults = Math.max(0, Math.round((opts.longEvents - 2) / 2));
    opts.log(`  ${opts.samples} runs with ${2 + 2 * shortResults} events, one run with ${2 + 2 * longResults} events`);
    const shortRuns = (await Promise.all(Array.from({ length: opts.samples }, (_, i) => grow(`grow-${tag}-s${i}`, shortResults)))).map((g) => g.run);
    const fillStart = nowMs();
    const { run: longRun, times: fill } = await grow(`grow-${tag}-long`, longResults);
    opts.log(`  long run filled in ${round((nowMs() - fillStart) / 1000, 1)} s`);
    const rate = (times: number[]) => (times.length < 2 ? Number.NaN : ((times.length - 1) * 1000) / ((times.at(-1) as number) - (times[0] as number)));
    const fillRates = { first: round(rate(fill.slice(1, 501)), 1), last: round(rate(fill.slice(-500)), 1) };
    if (!(await opts.quiesce())) opts.log('  (the platform did not go quiet after the fill; timing anyway)');

    // Interleave the two sizes so drift on the machine hits both alike.
    const shortLatencies: number[] = [];
    const longLatencies: number[] = [];
    for (let i = 0; i < opts.samples; i++) {
      shortLatencies.push(await timeOne(shortRuns[i] as GrowingRun));
      longLatencies.push(await timeOne(longRun));
    }
    if (unsettled > 0) opts.log(`  (${unsettled} of ${2 * opts.samples} decisions were timed before the platform went quiet)`);
    opts.log(
      `  decision at ${opts.shortEvents} events: median ${round(median(shortLatencies), 3)} ms; at ${2 + 2 * longResults}: median ${round(median(longLatencies), 3)} ms`,
    );
    return {
      short_prior_events: 2 + 2 * shortResults,
      long_prior_events: 2 + 2 * longResults,
      decision_short: summarize(shortLatencies),
      decision_long: summarize(longLatencies),
      fill_decisions_per_s: fillRates,
      unsettled_samples: unsettled,
    };
  } finally {
    sub.unsubscribe();
    await agents.close();
  }
}
