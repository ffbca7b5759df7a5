import type Redis from 'ioredis';
import { batonStreamNames, type NatsHandle } from '@baton/eventstore';
import { AgentClaims, type CycleOffer, cycleResult, onOffers, publishAgentResult, startCycleRun } from '@baton/testing';
import { VisibilityWatcher } from './visibility';
import { cpuFigures, formatCpu, machineCpu, type CpuReading } from './platform';
import { nowMs, round, sleep, summarize, type LatencySummary } from './stats';

export interface HopsOptions {
  nats: NatsHandle;
  redis: Redis;
  prefix: string;
  project: string;
  /** Concurrent runs (each has at most one result in flight). */
  runs: number;
  warmupSeconds: number;
  throughputSeconds: number;
  latencySeconds: number;
  /** Offered load for the latency phase, hops/s (default: half the sustained rate). */
  latencyRate?: number;
  /** CPU seconds used so far per accounted process (see `readCpu`). */
  cpu?: () => Record<string, CpuReading>;
  /** How the simulated agents publish and claim (default: {@link directAgents} on `nats`). */
  agents?: HopAgents;
  log: (line: string) => void;
}

/** The simulated agents' side of a hop: publishing a result, claiming the next handoff. */
export interface HopAgents {
  /** Publish an agent result (a {@link cycleResult}) and wait for the stream's ack. */
  publishResult(result: Record<string, unknown>): Promise<void>;
  /** Claim `handoffId` as `agent` (a ledger request); resolves the claim id. */
  claim(agent: string, handoffId: string): Promise<string>;
  close(): Promise<void>;
}

/**
 * Agents on one shared connection that publish straight into the inbox stream: a server without
 * authentication, where any client may (the bench's default platform).
 */
export function directAgents(nats: NatsHandle, prefix: string, project: string): HopAgents {
  const claims = new AgentClaims(nats, prefix, project);
  return {
    publishResult: (result) => publishAgentResult(nats, prefix, result),
    claim: (agent, handoffId) => claims.claim(agent, handoffId),
    close: () => claims.close(),
  };
}

export interface HopsResult {
  runs: number;
  /** Hops (result published → routed → handoff created → visible in the projections) per second, closed loop. */
  hops_per_s: number;
  /** Messages JetStream stored per hop (events + inbox), measured over the throughput window. */
  stored_messages_per_hop: number;
  /** Average stored event size in bytes over the throughput window. */
  event_bytes_avg: number;
  /** Closed-loop latency at saturation. */
  saturated_latency: LatencySummary;
  /** The offered load of the latency phase, hops/s. */
  offered_rate: number;
  /** Publish-to-visible latency at the offered load. */
  latency: LatencySummary;
  /** Hops the open loop could not offer because no run was idle. */
  not_offered: number;
  /** Hops still not visible 30 s after their result was published. */
  lost: number;
  /** CPU milliseconds each process spent per hop during the throughput window; null when not measured. */
  cpu_ms_per_hop: Record<string, number | null>;
  /** The sum of `cpu_ms_per_hop` over every process; null when any of them was not measured. */
  cpu_ms_per_hop_total: number | null;
  /** Why a `cpu_ms_per_hop` figure is null, per process. */
  cpu_not_measured: Record<string, string>;
  /** How busy the whole machine was during the throughput window (1 = every CPU busy). */
  machine_busy: number;
  /**
   * How busy the whole machine was while the open loop offered its load. Half the closed loop's
   * rate should keep it about half busy; near 1, the machine slowed down after the closed loop was
   * measured and `latency` was taken near saturation, not at half load.
   */
  latency_machine_busy: number;
  /** CPU milliseconds each process spent per hop offered during the open loop (at half the rate, batches are smaller); null when not measured. */
  latency_cpu_ms_per_hop: Record<string, number | null>;
}

interface RunSlot {
  id: string;
  agent: string;
  handoffId: string | null;
  /** The claim the slot's agent holds on `handoffId` (results are accepted only under it). */
  claim: { handoffId: string; claimId: string } | null;
  n: number;
  publishedAt: number | null;
}

/**
 * Drive the platform with simulated agents: every run's result dispatches the other agent, whose
 * offer (published by the ledger once `handoff.created` is stored) carries the event's stream
 * sequence; the hop is complete when the notifier's projections have applied that sequence. The
 * agent claims each offered handoff (a ledger request, as a real agent does) while the hop becomes
 * visible, and publishes its next result under that claim; a hop is timed from that publish.
 * Phase 1 (closed loop): every run publishes its next result as soon as its hop is visible —
 * the sustained rate. Phase 2 (open loop): results are published at a fixed rate (half the
 * sustained rate unless given) on idle runs — the latency distribution at that load.
 */
export async function measureHops(opts: HopsOptions): Promise<HopsResult> {
  const { nats, prefix, project } = opts;
  const watcher = new VisibilityWatcher(opts.redis, prefix, 1, nowMs);
  const slots = new Map<string, RunSlot>();
  const ready: RunSlot[] = [];
  let mode: 'closed' | 'open' = 'closed';
  let completions: Array<{ at: number; latency: number | null; phase: 'closed' | 'open' }> = [];
  let publishErrors = 0;
  // Where hops stand, for a phase that completes none: offers seen (router and ledger worked),
  // claims answered (the ledger), offers' events visible in the projections (the notifier).
  const progress = { offers: 0, claims: 0, visible: 0 };

  const agents = opts.agents ?? directAgents(nats, prefix, project);
  const publishNext = (slot: RunSlot) => {
    slot.n++;
    slot.publishedAt = nowMs();
    agents.publishResult(cycleResult(project, slot.id, slot.agent, slot.n, slot.claim ?? undefined)).catch(() => {
      publishErrors++;
    });
  };

  const stopOffers = onOffers(nats, prefix, project, (offer: CycleOffer) => {
    const slot = slots.get(offer.runId);
    if (!slot || slot.handoffId === offer.handoffId) return; // a duplicate offer publish
    slot.handoffId = offer.handoffId;
    slot.agent = offer.agent;
    const phase = mode;
    progress.offers++;
    const claimed = agents.claim(offer.agent, offer.handoffId);
    const visible = watcher.visible(offer.seq);
    void claimed.then(
      () => progress.claims++,
      () => undefined,
    );
    void visible.then(() => progress.visible++);
    void Promise.all([visible, claimed]).then(
      ([at, claimId]) => {
        completions.push({ at, latency: slot.publishedAt === null ? null : at - slot.publishedAt, phase });
        slot.publishedAt = null;
        slot.claim = { handoffId: offer.handoffId, claimId };
        if (mode === 'closed') publishNext(slot);
        else ready.push(slot);
      },
      () => {
        publishErrors++; // the claim failed: the run stops here and counts as lost
      },
    );
  });

  const names = batonStreamNames(prefix);
  const streamState = async () => {
    const [events, inbox] = await Promise.all([nats.jsm.streams.info(names.events), nats.jsm.streams.info(names.inbox)]);
    return { messages: events.state.messages + inbox.state.messages, eventBytes: events.state.bytes, events: events.state.messages };
  };

  try {
    const tag = Date.now().toString(36);
    opts.log(`  starting ${opts.runs} runs`);
    for (let i = 0; i < opts.runs; i++) {
      const slot: RunSlot = { id: `hop-${tag}-${i}`, agent: 'ping', handoffId: null, claim: null, n: 0, publishedAt: null };
      slots.set(slot.id, slot);
      await startCycleRun(nats, prefix, project, slot.id, 'bench');
    }

    // Phase 1: closed loop.
    await sleep(opts.warmupSeconds * 1000);
    const windowStart = nowMs();
    const before = await streamState();
    const cpuBefore = opts.cpu?.() ?? {};
    const machineBefore = machineCpu();
    const countFrom = completions.length;
    await sleep(opts.throughputSeconds * 1000);
    const windowEnd = nowMs();
    const cpuAfter = opts.cpu?.() ?? {};
    const machineAfter = machineCpu();
    const after = await streamState();
    const inWindow = completions.slice(countFrom).filter((c) => c.at >= windowStart && c.at <= windowEnd && c.latency !== null);
    if (inWindow.length === 0) {
      // Nothing to measure: say where the hops stopped instead of reporting figures of nothing.
      throw new Error(
        `no hop completed in the closed loop's ${opts.throughputSeconds} s window (${opts.runs} runs started; ${progress.offers} offers seen, ${progress.claims} claims answered, ${progress.visible} offers visible in the projections (applied through seq ${watcher.applied}), ${publishErrors} publish or claim errors)`,
      );
    }
    const hopsPerS = inWindow.length / ((windowEnd - windowStart) / 1000);
    const storedPerHop = (after.messages - before.messages) / inWindow.length;
    const eventBytes = after.events > before.events ? (after.eventBytes - before.eventBytes) / (after.events - before.events) : Number.NaN;
    const saturated = summarize(inWindow.map((c) => c.latency as number));
    const cpuPerHop = cpuFigures(cpuBefore, cpuAfter, inWindow.length, 1000);
    const machineBusy = busyBetween(machineBefore, machineAfter);
    opts.log(
      `  closed loop: ${round(hopsPerS, 1)} hops/s, p50 ${saturated.p50_ms} ms, p99 ${saturated.p99_ms} ms; machine busy ${round(machineBusy * 100, 0)}%`,
    );
    opts.log(`  CPU ms per hop: ${formatCpu(cpuPerHop)}`);

    // Drain: no new results; wait for every run to become idle.
    mode = 'open';
    const drainDeadline = Date.now() + 30_000;
    while (ready.length < slots.size && Date.now() < drainDeadline) await sleep(50);
    const stuck = slots.size - ready.length;

    // Phase 2: open loop at a fixed rate.
    const rate = opts.latencyRate ?? Math.max(1, hopsPerS / 2);
    opts.log(`  open loop at ${round(rate, 1)} hops/s for ${opts.latencySeconds} s`);
    completions = [];
    let offered = 0;
    let notOffered = 0;
    const openMachineBefore = machineCpu();
    const openCpuBefore = opts.cpu?.() ?? {};
    const openStart = nowMs();
    while (nowMs() - openStart < opts.latencySeconds * 1000) {
      const due = Math.floor(((nowMs() - openStart) / 1000) * rate) - offered - notOffered;
      for (let i = 0; i < due; i++) {
        const slot = ready.shift();
        if (slot) {
          offered++;
          publishNext(slot);
        } else {
          notOffered++;
        }
      }
      await sleep(1);
    }
    const openMachineAfter = machineCpu();
    const openCpu = cpuFigures(openCpuBefore, opts.cpu?.() ?? {}, Math.max(1, offered), 1000);
    const openBusy = busyBetween(openMachineBefore, openMachineAfter);
    const lostDeadline = Date.now() + 30_000;
    while (completions.filter((c) => c.latency !== null).length < offered && Date.now() < lostDeadline) await sleep(20);
    const openDone = completions.filter((c) => c.latency !== null);
    const warm = openStart + 1000;
    const latency = summarize(openDone.filter((c) => c.at - (c.latency as number) >= warm).map((c) => c.latency as number));
    opts.log(`  open loop: p50 ${latency.p50_ms} ms, p95 ${latency.p95_ms} ms, p99 ${latency.p99_ms} ms; machine busy ${round(openBusy * 100, 0)}%`);
    opts.log(`  CPU ms per hop in the open loop: ${formatCpu(openCpu)}`);

    return {
      runs: opts.runs,
      hops_per_s: round(hopsPerS, 1),
      stored_messages_per_hop: round(storedPerHop, 2),
      event_bytes_avg: Math.round(eventBytes),
      saturated_latency: saturated,
      offered_rate: round(rate, 1),
      latency,
      not_offered: notOffered,
      lost: offered - openDone.length + stuck + publishErrors,
      cpu_ms_per_hop: cpuPerHop.values,
      cpu_ms_per_hop_total: totalCpu(cpuPerHop.values),
      cpu_not_measured: cpuPerHop.not_measured,
      machine_busy: machineBusy,
      latency_machine_busy: openBusy,
      latency_cpu_ms_per_hop: openCpu.values,
    };
  } finally {
    stopOffers();
    await watcher.stop();
    await agents.close();
  }
}

/** The machine's busy share between two readings of {@link machineCpu} (1 = every CPU busy), NaN when one is missing. */
function busyBetween(before: ReturnType<typeof machineCpu>, after: ReturnType<typeof machineCpu>): number {
  return before && after ? round((after.busy - before.busy) / Math.max(1e-9, after.total - before.total), 3) : Number.NaN;
}

/** The sum of per-process figures, or null when one of them is missing. */
export function totalCpu(values: Record<string, number | null>): number | null {
  const all = Object.values(values);
  if (all.length === 0 || all.some((v) => v === null)) return null;
  return round(
    (all as number[]).reduce((a, b) => a + b, 0),
    2,
  );
}
