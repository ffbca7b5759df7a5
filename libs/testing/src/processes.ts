import { ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
// The private servers' helpers live with the integration specs' (one copy for libs and suites alike).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { freePort, pauseProcess, resumeProcess } from '../../eventstore/src/int/servers';

/**
 * Baton's services as child processes, for the end-to-end, fault, browser and scale suites, the
 * bench and the demo: find the repository, pick free ports, start a built service
 * (`node dist/apps/<name>/src/main.js`), keep its output, wait for `/health/ready`, stop or kill it.
 */

/** The four Baton services, in start order. */
export const SERVICES = ['ledger', 'router', 'watchdog', 'notifier'] as const;
export type ServiceName = (typeof SERVICES)[number];

/**
 * The repository root (the nearest folder above `from` holding a package.json and no project.json),
 * from source (libs/testing/src) or from the build (dist/libs/testing/src).
 */
export function repoRoot(from: string = __dirname): string {
  let dir = from;
  while (!existsSync(join(dir, 'package.json')) || existsSync(join(dir, 'project.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`cannot find the repository root above ${from}`);
    dir = parent;
  }
  return dir;
}

/** A free loopback port below the kernel's ephemeral range, for a server a test starts (libs/eventstore/src/int/servers.ts). */
export { freePort };

/** Pause a server process (SIGSTOP) and wait until all its threads have stopped; let it go on again (libs/eventstore/src/int/servers.ts). */
export { pauseProcess, resumeProcess };

export interface ServiceProcess {
  /** The app under `dist/apps` (ledger, router, watchdog, notifier). */
  name: string;
  /** BATON_INSTANCE of the process: it names the instance in logs and connection names. */
  instance: string;
  port: number;
  child: ChildProcess;
  /** The last 400 chunks of the process's stdout and stderr. */
  output: string[];
}

export interface StartServiceOptions {
  /** BATON_INSTANCE (default `<name>-1`). */
  instance?: string;
  /** The folder whose `dist/apps/<name>/src/main.js` is started, and the working directory (default {@link repoRoot}). */
  root?: string;
  /** Node flags placed before the script, e.g. heap sizes or `--cpu-prof` (default none). */
  nodeArgs?: readonly string[];
}

/**
 * Start one built service as its own process (`node dist/apps/<name>/src/main.js`) on `port`
 * (HTTP_PORT, bound to 127.0.0.1) with `env` over this process's environment.
 */
export function startService(name: string, port: number, env: Record<string, string>, options: StartServiceOptions = {}): ServiceProcess {
  const root = options.root ?? repoRoot();
  const instance = options.instance ?? `${name}-1`;
  const main = join(root, 'dist', 'apps', name, 'src', 'main.js');
  if (!existsSync(main)) throw new Error(`${main} is missing: build the services first (npx nx run-many -t build)`);
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), main], {
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

/**
 * Resolve when `/health/ready` answers 200, or fail with how the wait ended (the process's exit, or
 * the last readiness answer: a 503 names the failing checks; none when the port never answered) and
 * the service's last output.
 *
 * The deadline is the service's, not this process's: when this process's own event loop stalled
 * (a loaded machine, a long GC pause of the test runner) the polls in between never ran, and the
 * service's output was not read either. So once the deadline has passed, what the service wrote
 * meanwhile is read and readiness asked once more before failing, and the error says how long this
 * process stalled.
 */
export async function waitReady(service: ServiceProcess, timeoutMs = 30_000): Promise<void> {
  const started = Date.now();
  const deadline = started + timeoutMs;
  const ended = () => service.child.exitCode !== null || service.child.signalCode !== null;
  let last = 'its port never answered';
  let stalledMs = 0;
  const ask = async (): Promise<boolean> => {
    try {
      const response = await fetch(`http://127.0.0.1:${service.port}/health/ready`, { signal: AbortSignal.timeout(5_000) });
      if (response.ok) return true;
      last = `the last readiness answer: ${response.status} ${(await response.text()).slice(0, 500)}`;
    } catch (error) {
      // not listening yet, or the answer took longer than 5 s
      if ((error as Error).name === 'TimeoutError') last = 'the last readiness request had no answer within 5 s';
    }
    return false;
  };
  // This process's event-loop lag, sampled every 100 ms while the wait lasts.
  let tick = Date.now();
  const lag = setInterval(() => {
    const now = Date.now();
    stalledMs = Math.max(stalledMs, now - tick - 100);
    tick = now;
  }, 100);
  try {
    while (Date.now() < deadline && !ended()) {
      if (await ask()) return;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    if (!ended()) {
      // Read what the service wrote while this process was not reading, then ask once more.
      await new Promise((resolve) => setTimeout(resolve, 100));
      if (await ask()) return;
    }
  } finally {
    clearInterval(lag);
  }
  const how = ended()
    ? `it ended (${service.child.signalCode !== null ? `signal ${service.child.signalCode}` : `exit code ${String(service.child.exitCode)}`})`
    : `${Math.round((Date.now() - started) / 1000)} s passed; ${last}`;
  const stalled = stalledMs >= 2_000 ? `; this test process's event loop stalled for up to ${Math.round(stalledMs / 1000)} s meanwhile` : '';
  throw new Error(`${service.instance} did not become ready: ${how}${stalled}; its last output:\n${service.output.join('').slice(-3000)}`);
}

/** The last `lines` non-blank lines a service wrote (stdout and stderr, in order). */
export function lastLines(service: ServiceProcess, lines: number): string[] {
  return service.output
    .join('')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .slice(-lines);
}

/**
 * Each service of `services` that is no longer running — how it ended (exit code or signal) and
 * the last lines it wrote — so a run that lost one says which and why (a heap limit, a crash)
 * instead of only "no ledger is listening".
 */
export function endedServices(services: readonly ServiceProcess[], lines = 8): string[] {
  return services
    .filter((s) => s.child.exitCode !== null || s.child.signalCode !== null)
    .map((s) => {
      const how = s.child.signalCode !== null ? `signal ${s.child.signalCode}` : `exit code ${String(s.child.exitCode)}`;
      const last = lastLines(s, lines);
      return `${s.name} (${s.instance}) ended: ${how}; its last output:\n${last.map((line) => `  ${line.slice(0, 500)}`).join('\n')}`;
    });
}

/**
 * Send `signal` (SIGTERM: graceful shutdown; SIGKILL: a crash), SIGKILL after 15 s, and resolve
 * with the exit code (null when a signal ended it). A process that has already ended resolves at once.
 */
export async function stopService(service: ServiceProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  if (service.child.exitCode !== null || service.child.signalCode !== null) return service.child.exitCode;
  const exited = once(service.child, 'exit');
  service.child.kill(signal);
  const timer = setTimeout(() => service.child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
  return service.child.exitCode;
}

/** The node-options table of each repository root, read once. */
const nodeOptionTables = new Map<string, Record<string, unknown>>();

/**
 * The Node flags each service is deployed with (`infra/service-node-options.json`: heap sizes per
 * service), split into arguments. {@link startPlatform} starts services with them unless told
 * otherwise, so tests and the bench run what production runs.
 */
export function deployedNodeArgs(name: ServiceName, root: string = repoRoot()): string[] {
  const file = join(root, 'infra', 'service-node-options.json');
  let table = nodeOptionTables.get(file);
  if (table === undefined) {
    table = (JSON.parse(readFileSync(file, 'utf8')) as { services?: Record<string, unknown> }).services ?? {};
    nodeOptionTables.set(file, table);
  }
  const flags = table[name];
  if (typeof flags !== 'string') throw new Error(`${file}: services.${name} is not a string of node flags`);
  return flags.split(' ').filter((arg) => arg.length > 0);
}

export interface StartPlatformOptions {
  /** Processes of each service (instance ids `<name>-1`, `<name>-2`...; default 1). */
  instances?: number;
  /**
   * Node flags for the service processes (see {@link StartServiceOptions.nodeArgs}): the same for
   * every service, or each service's own (default: the deployed ones, {@link deployedNodeArgs}).
   */
  nodeArgs?: readonly string[] | ((name: ServiceName) => readonly string[]);
  /** How long each process may take to become ready (default 60 s). */
  readyTimeoutMs?: number;
  /** Variables for one service over `env`, e.g. its own NATS_CREDS (see {@link startAuthNatsServer}). */
  envFor?: (name: ServiceName) => Record<string, string>;
}

/**
 * Start the four services ({@link SERVICES}), `instances` processes of each on free ports, and wait
 * until all are ready. When one is not, all are killed and the error is thrown.
 */
export async function startPlatform(env: Record<string, string>, options: StartPlatformOptions = {}): Promise<ServiceProcess[]> {
  const instances = options.instances ?? 1;
  const services: ServiceProcess[] = [];
  try {
    for (const name of SERVICES) {
      for (let i = 1; i <= instances; i++) {
        services.push(
          startService(
            name,
            await freePort(),
            { ...env, ...(options.envFor?.(name) ?? {}) },
            {
              instance: `${name}-${i}`,
              nodeArgs: typeof options.nodeArgs === 'function' ? options.nodeArgs(name) : (options.nodeArgs ?? deployedNodeArgs(name)),
            },
          ),
        );
      }
    }
    await Promise.all(services.map((service) => waitReady(service, options.readyTimeoutMs ?? 60_000)));
  } catch (error) {
    await Promise.all(services.map((service) => stopService(service, 'SIGKILL')));
    throw error;
  }
  return services;
}

/** Run a command to completion in the repository root (or `cwd`), collecting its output. */
export async function run(
  command: string,
  args: string[],
  env: Record<string, string>,
  cwd: string = repoRoot(),
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(command, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}
