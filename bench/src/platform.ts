import { readdirSync, readFileSync } from 'node:fs';
import type { ServiceProcess } from '@baton/testing';

/**
 * Node flags Baton's services are deployed with (infra/scale/README.md): a 4 MB young generation
 * (instead of up to 16 MB per semi-space) and a 96 MB old generation, so a service's resident
 * memory tracks what it keeps instead of how lazily V8 collects. Same as NODE_OPTIONS in
 * infra/scale/service.env.
 */
export const SERVICE_NODE_FLAGS = '--max-semi-space-size=4 --max-old-space-size=96';

/**
 * The node flags the bench starts each service with: SERVICE_NODE_FLAGS, or BENCH_NODE_ARGS when set
 * (e.g. '' for Node's defaults, or `--cpu-prof --cpu-prof-dir=/tmp/prof`).
 */
export function benchNodeArgs(): string[] {
  return (process.env['BENCH_NODE_ARGS'] ?? SERVICE_NODE_FLAGS).split(' ').filter((arg) => arg.length > 0);
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

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat; null when unknown. */
export function cpuSeconds(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15)
    return ticks / 100; // USER_HZ is 100 on Linux
  } catch {
    return null;
  }
}

/** The pid of the first process whose command name is `name` (e.g. nats-server), or undefined. */
export function pidOf(name: string): number | undefined {
  try {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === name) return Number(entry);
      } catch {
        // the process went away
      }
    }
  } catch {
    // no /proc
  }
  return undefined;
}

/** Processes whose CPU the bench accounts: the services, the brokers when local, the bench itself. */
export function accountedProcesses(services: readonly ServiceProcess[]): Record<string, number | undefined> {
  return {
    ...Object.fromEntries(services.map((s) => [s.instance === `${s.name}-1` ? s.name : s.instance, s.child.pid])),
    'nats-server': pidOf('nats-server'),
    'redis-server': pidOf('redis-server'),
    bench: process.pid,
  };
}

/** Snapshot of CPU seconds per accounted process. */
export function cpuSnapshot(pids: Record<string, number | undefined>): Record<string, number | null> {
  return Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, cpuSeconds(pid)]));
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
