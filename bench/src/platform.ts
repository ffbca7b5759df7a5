import { ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { batonStreamNames, type NatsHandle } from '@baton/eventstore';
import { sleep } from './stats';

/**
 * Node flags Baton's services are deployed with (infra/scale/README.md): a 4 MB young generation
 * (instead of up to 16 MB per semi-space) and a 96 MB old generation, so a service's resident
 * memory tracks what it keeps instead of how lazily V8 collects. Same as NODE_OPTIONS in
 * infra/scale/service.env.
 */
export const SERVICE_NODE_FLAGS = '--max-semi-space-size=4 --max-old-space-size=96';

/** The four Baton services, in start order. */
export const SERVICES = ['ledger', 'router', 'watchdog', 'notifier'] as const;
export type ServiceName = (typeof SERVICES)[number];

/** The repository root (the folder holding package.json), from source or from dist. */
export function repoRoot(): string {
  let dir = __dirname;
  while (!existsSync(join(dir, 'package.json')) || existsSync(join(dir, 'project.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('cannot find the repository root');
    dir = parent;
  }
  return dir;
}

/** A free loopback port, chosen by the kernel. */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  server.close();
  await once(server, 'close');
  return port;
}

export interface ServiceProcess {
  name: ServiceName;
  instance: string;
  port: number;
  child: ChildProcess;
  output: string[];
}

/** Start one built service as its own process (`node dist/apps/<name>/src/main.js`). */
export function startService(name: ServiceName, port: number, env: Record<string, string>, instance = `${name}-1`): ServiceProcess {
  const root = repoRoot();
  const main = join(root, 'dist', 'apps', name, 'src', 'main.js');
  if (!existsSync(main)) throw new Error(`${main} is missing: build the services first (npx nx run-many -t build)`);
  // The services run with the heap settings infra/scale recommends (SERVICE_NODE_FLAGS);
  // BENCH_NODE_ARGS replaces them (e.g. '' for Node's defaults, or `--cpu-prof --cpu-prof-dir=/tmp/prof`).
  const nodeArgs = (process.env['BENCH_NODE_ARGS'] ?? SERVICE_NODE_FLAGS).split(' ').filter((arg) => arg.length > 0);
  const child = spawn(process.execPath, [...nodeArgs, main], {
    cwd: root,
    env: { ...process.env, ...env, HTTP_PORT: String(port), HTTP_HOST: '127.0.0.1', BATON_INSTANCE: instance },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  const keep = (chunk: Buffer) => {
    output.push(chunk.toString());
    if (output.length > 400) output.splice(0, output.length - 400);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return { name, instance, port, child, output };
}

/** Resolve when `/health/ready` answers 200, or fail with the service's last output. */
export async function waitReady(service: ServiceProcess, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (service.child.exitCode !== null) break;
    try {
      const response = await fetch(`http://127.0.0.1:${service.port}/health/ready`);
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await sleep(200);
  }
  throw new Error(`${service.instance} did not become ready:\n${service.output.join('').slice(-3000)}`);
}

/** SIGTERM (graceful shutdown), SIGKILL after 15 s; resolves with the exit code. */
export async function stopService(service: ServiceProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  if (service.child.exitCode !== null || service.child.signalCode !== null) return service.child.exitCode;
  const exited = once(service.child, 'exit');
  service.child.kill(signal);
  const timer = setTimeout(() => service.child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
  return service.child.exitCode;
}

/** Start `instances` processes of each service and wait until all are ready. */
export async function startPlatform(env: Record<string, string>, instances = 1): Promise<ServiceProcess[]> {
  const services: ServiceProcess[] = [];
  for (const name of SERVICES) {
    for (let i = 1; i <= instances; i++) services.push(startService(name, await freePort(), env, `${name}-${i}`));
  }
  try {
    await Promise.all(services.map((service) => waitReady(service)));
  } catch (error) {
    await Promise.all(services.map((service) => stopService(service, 'SIGKILL')));
    throw error;
  }
  return services;
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

/**
 * Wait until every durable consumer on the deployment's events and inbox streams has delivered
 * and had acknowledged everything (num_pending and num_ack_pending both 0). Returns false on timeout.
 */
export async function waitQuiet(nats: NatsHandle, prefix: string, timeoutMs: number, durables?: readonly string[]): Promise<boolean> {
  const names = batonStreamNames(prefix);
  const deadline = Date.now() + timeoutMs;
  let quietRounds = 0;
  while (Date.now() < deadline) {
    let busy = false;
    for (const stream of [names.events, names.inbox]) {
      for await (const info of nats.jsm.consumers.list(stream)) {
        if (!info.config.durable_name) continue;
        if (durables && !durables.includes(info.config.durable_name)) continue;
        if (info.num_pending > 0 || info.num_ack_pending > 0) busy = true;
      }
    }
    quietRounds = busy ? 0 : quietRounds + 1;
    if (quietRounds >= 2) return true;
    await sleep(100);
  }
  return false;
}

/** Delete a deployment's streams and Redis keys (what a test prefix leaves behind). */
export async function cleanupDeployment(nats: NatsHandle, redis: { keys(pattern: string): Promise<string[]>; unlink(...keys: string[]): Promise<number> }, prefix: string): Promise<void> {
  const names = batonStreamNames(prefix);
  for (const stream of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(stream).catch(() => undefined);
  const keys = await redis.keys(`${prefix}:*`);
  for (let i = 0; i < keys.length; i += 1000) await redis.unlink(...keys.slice(i, i + 1000));
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
