// The bench phase that rebuilds a long stream (default 1,000,000 events): how fast the five
// projections are rebuilt from it, and how much memory the rebuilding process needs.
//
// The stream is filled directly (no services): the projections' example scenario (runs that stop,
// hold and resume; handoffs returned, decided, escalated; notices) decided by the real deciders,
// repeated for as many projects as it takes, each project's copy with its own project key, so
// every aggregate, inbox item and stop packet is distinct. Then a separate node process — this
// file run as a script — rebuilds every projection (`BatonProjector.rebuildAll`, what `baton
// replay` and the notifier run) while the parent samples its resident memory.
//
//   node dist/bench/src/rebuild-million.js <prefix> [node flags go before the script]
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { MsgIds, Subjects, createEventRegistry } from '@baton/contracts';
import { batonStreamNames, batonTopology, connectNats, eventHeaders, headersFrom, provision, type NatsHandle } from '@baton/eventstore';
import {
  createBatonProjector,
  createProjectionStore,
  createRedis,
  foldScenario,
  scenarioEnvelope,
  jetStreamReplaySource,
  scenarioSteps,
  type RebuildProgress,
  type RedisHandle,
} from '@baton/projections';
import { cleanupDeployment } from '@baton/testing';
import { nowMs, round } from './stats';

export interface LongRebuildResult {
  /** Events in the stream that was rebuilt. */
  events: number;
  projections: number;
  /** Appends per second while filling the stream (windowed JetStream publishes). */
  append_per_s: number;
  /** Seconds the rebuild took in the child (first read to last swap). */
  seconds: number;
  events_per_s: number;
  /** Peak resident memory of the rebuilding process (VmHWM), MB. */
  peak_rss_mb: number | null;
  /** CPU microseconds per event of the rebuilding process. */
  cpu_us_per_event: number | null;
  /** Node flags of the rebuilding process. */
  node_flags: string;
  /** What the rebuilt projections hold in Redis, or null when it could not be measured. */
  redis: RedisFootprint | null;
  /** The aggregates the stream's events belong to, by kind (runs, handoffs, meshes…). */
  aggregates: Record<string, number>;
}

/** The Redis memory of a deployment's projections (`MEMORY USAGE` of every key), after a rebuild. */
export interface RedisFootprint {
  keys: number;
  /** MEMORY USAGE summed over the keys, MB. */
  mb: number;
  /** Bytes per event of the stream the projections were built from. */
  bytes_per_event: number;
  /** Per projection (`runs`, `handoffs`, `stops`, `inbox`, `notices`, and `meta` for the rest): keys and MB. */
  by_projection: Record<string, { keys: number; mb: number }>;
}

/** What the child prints on its last stdout line. */
interface ChildReport {
  events: number;
  seconds: number;
  cpu_us: number;
  max_rss_kb: number;
  statuses: Record<string, string>;
}

const encoder = new TextEncoder();
const TEMPLATE_PROJECT = 'zqtemplatezq';

/**
 * Append at least `count` events to `<PREFIX>_EVENTS`: the example scenario once per project
 * (`p0`, `p1`, ...), published as the event store would (payloads as its validation returns them,
 * subject per aggregate, `Nats-Msg-Id`, its headers with the schema fingerprint, a `traceparent` on
 * every third event) with 256 publishes in flight.
 *
 * For a prefix of its own only (the bench makes a fresh one): on a running deployment's prefix the
 * services would take these events as real — the router and ledger reacting to runs and handoffs
 * no one started, the notifier showing them to operators — and nothing removes them from the
 * stream afterwards.
 */
export async function fillStream(
  nats: NatsHandle,
  prefix: string,
  count: number,
): Promise<{ events: number; appendPerS: number; aggregates: Record<string, number> }> {
  await provision(nats.jsm, batonTopology(prefix));
  const registry = createEventRegistry();
  // One template copy of the scenario, serialised once; each project's copy swaps the project key.
  const template = foldScenario(scenarioSteps({ project: TEMPLATE_PROJECT })).map((e, index) => {
    const envelope = scenarioEnvelope(registry, e, `ev-${index}`, TEMPLATE_PROJECT);
    return { kind: e.aggregate, id: e.id, envelopeId: envelope.id, type: envelope.type, version: envelope.version, json: JSON.stringify(envelope) };
  });
  const started = nowMs();
  const inFlight = new Set<Promise<unknown>>();
  let events = 0;
  const seen = new Set<string>();
  const aggregates: Record<string, number> = {};
  for (let p = 0; events < count; p++) {
    const project = `p${p}`;
    seen.clear();
    for (const t of template) {
      if (events >= count) break;
      events++;
      if (!seen.has(`${t.kind}/${t.id}`)) {
        seen.add(`${t.kind}/${t.id}`);
        aggregates[t.kind] = (aggregates[t.kind] ?? 0) + 1;
      }
      const headers = eventHeaders(registry, t.type, t.version);
      if (events % 3 === 0) headers['traceparent'] = `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01`;
      const ack = nats.js
        .publish(Subjects.aggregate(prefix, project, t.kind, t.id), encoder.encode(t.json.split(TEMPLATE_PROJECT).join(project)), {
          msgID: MsgIds.event(project, t.kind, t.id, t.envelopeId),
          headers: headersFrom(headers),
        })
        .finally(() => inFlight.delete(ack));
      inFlight.add(ack);
      if (inFlight.size >= 256) await Promise.race(inFlight);
    }
  }
  await Promise.all(inFlight);
  return { events, appendPerS: Math.round(events / ((nowMs() - started) / 1000)), aggregates };
}

/** Keys whose MEMORY USAGE is asked in one pipeline. */
const MEMORY_BATCH = 1_000;

/**
 * The Redis memory the projections of `prefix` hold: `MEMORY USAGE` (the key, its value and
 * Redis's overhead for them; nested values sampled, Redis's default) of every key under
 * `<prefix>:proj:`, summed per projection — what an SRE sizes Redis by, since the projections keep
 * every run, handoff and item the stream holds.
 */
export async function redisFootprint(redis: RedisHandle['client'], prefix: string, events: number): Promise<RedisFootprint> {
  const base = `${prefix}:proj:`;
  const by: Record<string, { keys: number; bytes: number }> = {};
  let keys = 0;
  let bytes = 0;
  let batch: string[] = [];
  const measure = async (names: string[]) => {
    const pipeline = redis.pipeline();
    for (const name of names) pipeline.memory('USAGE', name);
    const answers = (await pipeline.exec()) ?? [];
    names.forEach((name, index) => {
      const [error, value] = answers[index] ?? [null, null];
      const size = error === null && typeof value === 'number' ? value : 0;
      const projection = /^([a-z]+):g\d+:/.exec(name.slice(base.length))?.[1] ?? 'meta';
      const entry = (by[projection] ??= { keys: 0, bytes: 0 });
      entry.keys++;
      entry.bytes += size;
      keys++;
      bytes += size;
    });
  };
  for await (const found of redis.scanStream({ match: `${base}*`, count: MEMORY_BATCH })) {
    batch.push(...(found as string[]));
    if (batch.length >= MEMORY_BATCH) {
      await measure(batch);
      batch = [];
    }
  }
  if (batch.length > 0) await measure(batch);
  const mb = (b: number) => round(b / 2 ** 20, 1);
  return {
    keys,
    mb: mb(bytes),
    bytes_per_event: events > 0 ? Math.round(bytes / events) : 0,
    by_projection: Object.fromEntries(Object.entries(by).map(([name, entry]) => [name, { keys: entry.keys, mb: mb(entry.bytes) }])),
  };
}

function vmHwmMb(pid: number): number | null {
  try {
    const match = /VmHWM:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? round(Number(match[1]) / 1024, 1) : null;
  } catch {
    return null;
  }
}

export interface LongRebuildOptions {
  nats: NatsHandle;
  natsUrl: string;
  redisUrl: string;
  /** Events to fill the stream with (default 1,000,000). */
  events?: number;
  /**
   * Node flags of the rebuilding process (default: BENCH_REBUILD_NODE_ARGS, split on spaces — e.g.
   * `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile it — else none: Node's defaults, as `baton replay` runs).
   */
  nodeFlags?: string[];
  log: (line: string) => void;
}

/** Fill a fresh deployment's events stream with `events` events, rebuild it in a child process, clean up. */
export async function measureLongRebuild(opts: LongRebuildOptions): Promise<LongRebuildResult> {
  const prefix = `benchrb${randomBytes(4).toString('hex')}`;
  const redis = createRedis(opts.redisUrl, { commandTimeout: 60_000 });
  try {
    opts.log(`  filling ${prefix}_EVENTS with ${opts.events ?? 1_000_000} events`);
    const filled = await fillStream(opts.nats, prefix, opts.events ?? 1_000_000);
    opts.log(`  appended ${filled.events} events at ${filled.appendPerS}/s; rebuilding in a child process`);
    const flags = opts.nodeFlags ?? (process.env['BENCH_REBUILD_NODE_ARGS'] ?? '').split(' ').filter(Boolean);
    const child = spawn(process.execPath, [...flags, __filename, prefix], {
      env: { ...process.env, NATS_URL: opts.natsUrl, REDIS_URL: opts.redisUrl },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let peak: number | null = null;
    const sampler = setInterval(() => {
      const hwm = child.pid === undefined ? null : vmHwmMb(child.pid);
      if (hwm !== null) peak = Math.max(peak ?? 0, hwm);
    }, 100);
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
      const lines = out.split('\n');
      out = lines.pop() ?? '';
      for (const line of lines) if (line.startsWith('progress ')) opts.log(`  ${line}`);
      if (lines.some((l) => l.startsWith('{'))) out = lines.find((l) => l.startsWith('{')) ?? '';
    });
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    clearInterval(sampler);
    if (code !== 0 || !out.startsWith('{')) throw new Error(`the rebuilding process exited ${code} without a report`);
    const report = JSON.parse(out) as ChildReport;
    const childPeak = round(report.max_rss_kb / 1024, 1);
    let footprint: RedisFootprint | null = null;
    try {
      footprint = await redisFootprint(redis.client, prefix, report.events);
    } catch (error) {
      opts.log(`  the projections' Redis memory could not be measured: ${(error as Error).message}`);
    }
    return {
      events: report.events,
      projections: Object.keys(report.statuses).length,
      append_per_s: filled.appendPerS,
      seconds: round(report.seconds, 2),
      events_per_s: Math.round(report.events / report.seconds),
      peak_rss_mb: Math.max(peak ?? 0, childPeak) || null,
      cpu_us_per_event: report.events > 0 ? round(report.cpu_us / report.events, 1) : null,
      node_flags: flags.join(' '),
      redis: footprint,
      aggregates: filled.aggregates,
    };
  } finally {
    await cleanupDeployment(opts.nats, redis.client, prefix);
    await redis.close();
  }
}

/** The child: rebuild every projection of `<prefix>` from its events stream and report. */
async function child(prefix: string): Promise<void> {
  const nats = await connectNats({ servers: process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222', name: 'bench-rebuild', reconnect: false });
  const redis = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
  try {
    const store = createProjectionStore({ redis: redis.client, prefix: `${prefix}:proj` });
    const projector = createBatonProjector({ store });
    const registry = createEventRegistry();
    const state = (await nats.jsm.streams.info(batonStreamNames(prefix).events)).state;
    let lastReport = 0;
    const cpuStart = process.cpuUsage();
    const started = nowMs();
    const results = await projector.rebuildAll(jetStreamReplaySource({ nats, prefix, registry }), {
      by: 'bench',
      targetSeq: state.last_seq,
      totalEvents: state.messages,
      onProgress: (p: RebuildProgress) => {
        if (p.elapsedMs - lastReport < 5000) return;
        lastReport = p.elapsedMs;
        process.stdout.write(
          `progress ${p.events}/${state.messages} events, ${Math.round((p.events * 1000) / Math.max(1, p.elapsedMs))}/s, rss ${Math.round(process.memoryUsage.rss() / 2 ** 20)} MB\n`,
        );
      },
    });
    const seconds = (nowMs() - started) / 1000;
    const cpu = process.cpuUsage(cpuStart);
    for (const result of Object.values(results)) if (result.status === 'swapped') await result.cleanup;
    const report: ChildReport = {
      events: state.messages,
      seconds,
      cpu_us: cpu.user + cpu.system,
      max_rss_kb: process.resourceUsage().maxRSS,
      statuses: Object.fromEntries(Object.entries(results).map(([name, r]) => [name, r.status])),
    };
    process.stdout.write(`${JSON.stringify(report)}\n`);
  } finally {
    await redis.close();
    await nats.close();
  }
}

if (require.main === module) {
  const prefix = process.argv[2];
  if (!prefix) {
    process.stderr.write('usage: node dist/bench/src/rebuild-million.js <prefix>\n');
    process.exit(2);
  }
  child(prefix).catch((error: unknown) => {
    process.stderr.write(`rebuild failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
}

/** Events of the long rebuild phase: `--rebuild-events=N` (0 skips it), else 1,000,000 (100,000 with `--quick`). */
export function longRebuildEvents(argv: readonly string[]): number {
  const hit = argv.find((a) => a.startsWith('--rebuild-events='));
  if (hit !== undefined) return Math.max(0, Math.floor(Number(hit.slice('--rebuild-events='.length)) || 0));
  return argv.includes('--quick') ? 100_000 : 1_000_000;
}

/** The phase's lines in the text report. */
export function longRebuildLines(result: LongRebuildResult): string[] {
  return [
    `  Baton rebuild of a long stream   ${result.events_per_s} events/s (${result.events} events, ${result.projections} projections, ${result.seconds} s), ` +
      `peak RSS ${result.peak_rss_mb ?? '?'} MB, ${result.cpu_us_per_event ?? '?'} µs CPU per event (rebuilding process${result.node_flags ? `, node ${result.node_flags}` : ''})`,
    `  the projections in Redis          ${
      result.redis === null
        ? 'not measured'
        : `${result.redis.mb} MB in ${result.redis.keys} keys, ${result.redis.bytes_per_event} bytes per event (${Object.entries(result.redis.by_projection)
            .map(([name, p]) => `${name} ${p.mb} MB`)
            .join(', ')})`
    }; the stream's aggregates: ${Object.entries(result.aggregates)
      .map(([kind, n]) => `${n} ${kind}`)
      .join(', ')}`,
  ];
}
