import { readFileSync } from 'node:fs';
import { MetricName, metricSample } from '@baton/platform';
import { deployedNodeArgs, SERVICES, type ServiceName, type ServiceProcess } from '@baton/testing';
import { findListeningProcess, type ProcessLookup } from './listener';
import { round } from './stats';

/**
 * The node flags the bench starts a service with: the ones it is deployed with
 * (`infra/service-node-options.json`: a 4 MB young generation and an old generation sized to the
 * service's working set, so resident memory tracks what a service keeps instead of how lazily V8
 * collects), or BENCH_NODE_ARGS for every service when set (e.g. '' for Node's defaults, or
 * `--cpu-prof --cpu-prof-dir=/tmp/prof`).
 */
export function benchNodeArgs(name: ServiceName): string[] {
  const flags = process.env['BENCH_NODE_ARGS'];
  return flags === undefined ? deployedNodeArgs(name) : flags.split(' ').filter((arg) => arg.length > 0);
}

/** How the services were started, for the report: each service's node flags. */
export function benchNodeFlagsReport(): Record<ServiceName, string> {
  return Object.fromEntries(SERVICES.map((name) => [name, benchNodeArgs(name).join(' ')])) as Record<ServiceName, string>;
}

/** Resident memory of a process in MB (VmRSS from /proc/<pid>/status), or null when unknown. */
export function rssMb(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = /VmRSS:\s+(\d+)\s+kB/.exec(status);
    return match ? Math.round((Number(match[1]) / 1024) * 10) / 10 : null;
  } catch {
    return null;
  }
}

/** What a service's event store keeps in its fold cache, from its `/metrics` (MB: estimated heap, see `heapWeight`). */
export interface FoldCacheReading {
  entries: number;
  mb: number;
  max_mb: number | null;
  evicted: number;
  /**
   * The service's V8 heap at the same scrape (MB, prom-client's default metrics): what is live or
   * not yet collected (`used`), what V8 has reserved for it (`total`), and memory held outside the
   * heap by buffers (`external`) — so an RSS figure can be split into what the service keeps and
   * what the collector has not returned; null when the metrics lack them.
   */
  heap: { used_mb: number; total_mb: number; external_mb: number } | null;
}

/** The fold cache of the service listening on `port` (127.0.0.1), or null when its metrics could not be read. */
export async function foldCacheOf(port: number): Promise<FoldCacheReading | null> {
  let text: string;
  try {
    const response = await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(5_000) });
    if (!response.ok) return null;
    text = await response.text();
  } catch {
    return null;
  }
  const entries = metricSample(text, MetricName.foldCacheEntries);
  const bytes = metricSample(text, MetricName.foldCacheBytes);
  if (entries === undefined || bytes === undefined) return null;
  const max = metricSample(text, MetricName.foldCacheMaxBytes);
  const mb = (value: number) => round(value / (1024 * 1024), 1);
  const used = metricSample(text, 'baton_nodejs_heap_size_used_bytes');
  const total = metricSample(text, 'baton_nodejs_heap_size_total_bytes');
  const external = metricSample(text, 'baton_nodejs_external_memory_bytes');
  return {
    entries,
    mb: mb(bytes),
    max_mb: max === undefined ? null : mb(max),
    evicted: metricSample(text, MetricName.foldCacheEvictions) ?? 0,
    heap: used === undefined || total === undefined || external === undefined ? null : { used_mb: mb(used), total_mb: mb(total), external_mb: mb(external) },
  };
}

/** Fields of /proc/<pid>/stat after the command name (which may hold spaces), or null when unreadable. */
function statFields(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat; null when unknown. */
export function cpuSeconds(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  const fields = statFields(pid);
  if (fields === null) return null;
  const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15)
  return ticks / 100; // USER_HZ is 100 on Linux
}

/** The URLs of the servers the bench talks to (NATS_URL, REDIS_URL, with the bench's defaults). */
export interface BrokerUrls {
  nats: string;
  redis: string;
}

export function brokerUrls(env: NodeJS.ProcessEnv = process.env): BrokerUrls {
  return { nats: env['NATS_URL'] ?? 'nats://127.0.0.1:4222', redis: env['REDIS_URL'] ?? 'redis://127.0.0.1:6379' };
}

const lookups = new Map<string, ProcessLookup>();

/**
 * The local process serving `url`: the one listening on its address and port (not the first
 * process with the server's name), looked up once per URL; `{ pid: null, reason }` when it cannot
 * be named (a remote host, a host name, a socket of another user, several listeners).
 */
export function serverProcess(url: string, defaultPort: number): ProcessLookup {
  const key = `${url}|${defaultPort}`;
  let found = lookups.get(key);
  if (found === undefined) {
    found = findListeningProcess(url, defaultPort);
    lookups.set(key, found);
  }
  return found;
}

/** nats-server and redis-server as the bench reaches them (by port, see {@link serverProcess}). */
export function brokerProcesses(urls: BrokerUrls = brokerUrls()): Record<'nats-server' | 'redis-server', ProcessLookup> {
  return { 'nats-server': serverProcess(urls.nats, 4222), 'redis-server': serverProcess(urls.redis, 6379) };
}

/**
 * Processes whose CPU the bench accounts: the services, nats-server and redis-server (found by the
 * port the bench connects to), the bench itself; each with its pid or why it has none.
 */
export function accountedTargets(services: readonly ServiceProcess[], urls: BrokerUrls = brokerUrls()): Record<string, ProcessLookup> {
  const serviceEntry = (s: ServiceProcess): ProcessLookup =>
    s.child.pid === undefined ? { pid: null, reason: `${s.instance} has no pid (it did not start)` } : { pid: s.child.pid, via: 'proc' };
  return {
    ...Object.fromEntries(services.map((s) => [s.instance === `${s.name}-1` ? s.name : s.instance, serviceEntry(s)])),
    ...brokerProcesses(urls),
    bench: { pid: process.pid, via: 'proc' },
  };
}

/** {@link accountedTargets} as bare pids (undefined when unknown; the reason is dropped). */
export function accountedProcesses(services: readonly ServiceProcess[], urls: BrokerUrls = brokerUrls()): Record<string, number | undefined> {
  return Object.fromEntries(Object.entries(accountedTargets(services, urls)).map(([name, found]) => [name, found.pid ?? undefined]));
}

/** Snapshot of CPU seconds per accounted process. */
export function cpuSnapshot(pids: Record<string, number | undefined>): Record<string, number | null> {
  return Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, cpuSeconds(pid)]));
}

/** One process's CPU seconds so far (with its start time, so a reused pid is told apart), or why they could not be read. */
export type CpuReading = { pid: number; started: number; seconds: number } | { pid: number | null; seconds: null; reason: string };

/** CPU seconds of each target now, each with its pid (or why it has none). */
export function readCpu(targets: Record<string, ProcessLookup>): Record<string, CpuReading> {
  return Object.fromEntries(
    Object.entries(targets).map(([name, found]): [string, CpuReading] => {
      if (found.pid === null) return [name, { pid: null, seconds: null, reason: found.reason }];
      const fields = statFields(found.pid);
      if (fields === null) return [name, { pid: found.pid, seconds: null, reason: `cannot read /proc/${found.pid}/stat (the process exited?)` }];
      // utime, stime, starttime: fields 14, 15 and 22 of /proc/<pid>/stat, in USER_HZ (100 on Linux).
      return [name, { pid: found.pid, started: Number(fields[19]), seconds: (Number(fields[11]) + Number(fields[12])) / 100 }];
    }),
  );
}

/** CPU per unit of work per process; null where it could not be measured, with the reason in `not_measured`. */
export interface CpuFigures {
  values: Record<string, number | null>;
  not_measured: Record<string, string>;
}

/** CPU seconds spent between two readings of one process, or why there is no such figure. */
function cpuSpent(start: CpuReading | undefined, end: CpuReading | undefined): number | string {
  if (start === undefined || end === undefined) return 'not read at both ends of the window';
  if (start.seconds === null) return start.reason;
  if (end.seconds === null) return end.reason;
  if (start.pid !== end.pid) return `a different process at the end of the window (pid ${start.pid}, then ${end.pid})`;
  if (start.started !== end.started) return `pid ${start.pid} is another process at the end of the window (it exited and the pid was reused)`;
  if (end.seconds < start.seconds) return `CPU time went backwards for pid ${start.pid}`;
  return end.seconds - start.seconds;
}

/**
 * CPU each process spent per unit of work between two {@link readCpu} snapshots, scaled (1000:
 * ms per unit, 1e6: µs per unit). A figure that could not be measured is null, with its reason in
 * `not_measured`: never a negative or borrowed number.
 */
export function cpuFigures(before: Record<string, CpuReading>, after: Record<string, CpuReading>, units: number, scale: number, digits = 2): CpuFigures {
  const values: Record<string, number | null> = {};
  const notMeasured: Record<string, string> = {};
  for (const name of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const spent = units > 0 ? cpuSpent(before[name], after[name]) : 'no work done in the window to divide by';
    values[name] = typeof spent === 'number' ? round((spent * scale) / units, digits) : null;
    if (typeof spent === 'string') notMeasured[name] = spent;
  }
  return { values, not_measured: notMeasured };
}

/** "ledger 3.2, nats-server not measured: <reason>" for the readable output. */
export function formatCpu(figures: { values: Record<string, number | null>; not_measured?: Record<string, string> }): string {
  return Object.entries(figures.values)
    .map(([name, value]) => (value === null ? `${name} not measured: ${figures.not_measured?.[name] ?? 'unknown'}` : `${name} ${value}`))
    .join(', ');
}

/** Busy and total CPU time of the whole machine so far (from /proc/stat), in seconds. */
export function machineCpu(): { busy: number; total: number } | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
    const values = line.trim().split(/\s+/).slice(1).map(Number);
    const idle = (values[3] ?? 0) + (values[4] ?? 0);
    const total = values.reduce((sum, v) => sum + v, 0);
    return { busy: (total - idle) / 100, total: total / 100 };
  } catch {
    return null;
  }
}
