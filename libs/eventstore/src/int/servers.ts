// Servers of a test's own: a nats-server (alone, or several as a JetStream cluster) or a
// redis-server on a free loopback port, never the shared 4222 / 6379 other tests use, so that a
// test may stop it (a signal, as an operator or a crash would), start it again on the same port,
// reload, pause or kill it. For integration specs of every project and for libs/testing: not
// exported from @baton/eventstore (an agent's SDK never loads it); other projects import this file
// by its path, under `eslint-disable-next-line @nx/enforce-module-boundaries`, as they do the
// other test-only paths.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@baton/wait';
import { connectNats } from '../connection';

/**
 * A free loopback port for a server a test starts. It is picked at random below the kernel's
 * ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`): a port the kernel hands out itself
 * (`listen(0)`) is also what it hands the next outgoing connection as its local port, so one picked
 * that way could be taken by a client socket — any test's connection to NATS or Redis, or a client
 * reconnecting while the test's server is down — in the moment between this check and the server
 * binding it (seen as EADDRINUSE). Falls back to a kernel-chosen port where no such range can be read.
 */
export async function freePort(): Promise<number> {
  const low = ephemeralLow();
  const floor = 10_000;
  if (low - floor >= 1_000) {
    for (let attempt = 0; attempt < 50; attempt++) {
      const port = floor + Math.floor(Math.random() * (low - floor));
      if (await bindable(port)) return port;
    }
  }
  return kernelPort();
}

/** The first port of the kernel's ephemeral range; 0 where it cannot be read (not Linux). */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (Number.isInteger(low) && low > 0) return low;
  } catch {
    // not Linux: no range to stay below
  }
  return 0;
}

async function bindable(port: number): Promise<boolean> {
  const server = createServer();
  const bound = new Promise<boolean>((resolve) => {
    server.once('listening', () => resolve(true));
    server.once('error', () => resolve(false));
  });
  server.listen(port, '127.0.0.1');
  const ok = await bound;
  if (ok) {
    server.close();
    await once(server, 'close');
  }
  return ok;
}

async function kernelPort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  server.close();
  await once(server, 'close');
  return port;
}

/** Whether something accepts a TCP connection on 127.0.0.1:`port` now. */
function accepts(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

/**
 * Pause a server process (SIGSTOP) and resolve once every one of its threads has stopped.
 * `kill(2)` returns before the stop takes effect: the kernel hands the signal to one thread, and
 * until that thread next runs, the others — a nats-server's read loop woken by the data that just
 * arrived — go on. On a loaded machine that window is long enough for the server to answer the
 * request a test sent "to a paused server" (seen in CI: a publish acknowledged after the SIGSTOP).
 * So the wait reads each thread's state in `/proc/<pid>/task/<tid>/stat` until all say stopped
 * (`T`). Where there is no /proc (not Linux), it waits 100 ms instead. Rejects when the process is
 * not running or does not stop within 5 s.
 */
export async function pauseProcess(child: ChildProcess): Promise<void> {
  const pid = child.pid;
  if (pid === undefined || child.exitCode !== null || child.signalCode !== null) throw new Error('cannot pause a process that is not running');
  if (!child.kill('SIGSTOP')) throw new Error(`SIGSTOP to ${pid} was not sent`);
  const states = (): string[] | null => {
    try {
      return readdirSync(`/proc/${pid}/task`).map((tid) => {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        // "<tid> (<comm>) <state> …": the name may hold spaces and parentheses, the state follows the last ')'.
        return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      });
    } catch {
      return null;
    }
  };
  if (states() === null) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    return;
  }
  const deadline = Date.now() + 5_000;
  for (;;) {
    const now = states();
    // A thread that ended between the listing and the read is no longer running either.
    if (now === null || now.every((state) => state === 'T' || state === 't' || state === '')) return;
    if (Date.now() > deadline) throw new Error(`process ${pid} did not stop within 5 s of SIGSTOP (thread states: ${now.join('')})`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

/** Let a process paused by {@link pauseProcess} go on (SIGCONT); nothing when it has ended. */
export function resumeProcess(child: ChildProcess): void {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGCONT');
}

/** How long a server may take to listen once started. */
const START_TIMEOUT_MS = 15_000;

/** A server process of a test's own on 127.0.0.1. */
export interface PrivateServer {
  /** `nats-server` or `redis-server`. */
  readonly command: string;
  readonly port: number;
  /** `nats://127.0.0.1:<port>` or `redis://127.0.0.1:<port>`. */
  readonly url: string;
  /** A nats-server's monitoring port (`http://127.0.0.1:<port>/connz`, `/jsz`…) when started with `monitor`; otherwise null. */
  readonly monitorPort: number | null;
  /** The process of the latest start (pause and resume it with {@link PrivateServer.pause} / `resume`). */
  readonly child: ChildProcess;
  /** What the server wrote to stdout and stderr, over every start, in order. */
  readonly output: string[];
  /** Whether the latest start's process still runs. */
  running(): boolean;
  /** Pause it (SIGSTOP) and resolve once it has stopped: it answers nothing until {@link resume} ({@link pauseProcess}). */
  pause(): Promise<void>;
  /** Let a paused server go on (SIGCONT). */
  resume(): void;
  /** Start it again, on the same port with the same arguments, and wait until it listens. */
  start(): Promise<void>;
  /** Send `signal` (SIGTERM by default) and wait for the exit; nothing when it is not running. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** SIGKILL, and wait for the exit. */
  kill(): Promise<void>;
  /** Kill it and delete the folder this helper made for it (a JetStream store, Redis's dir). */
  remove(): Promise<void>;
}

/** A private nats-server: a {@link PrivateServer} that can also reload its configuration. */
export interface PrivateNatsServer extends PrivateServer {
  /**
   * Have the server reload its configuration file (SIGHUP, as `nats-server --signal reload` sends)
   * and resolve once it logs that it did; rejects with its words when it refused the reload.
   */
  reload(): Promise<void>;
}

class ServerProcess implements PrivateNatsServer {
  readonly output: string[] = [];
  private current: ChildProcess | undefined;

  constructor(
    readonly command: string,
    readonly port: number,
    readonly url: string,
    private readonly args: readonly string[],
    private readonly dir: string | undefined,
    readonly monitorPort: number | null = null,
  ) {}

  get child(): ChildProcess {
    if (!this.current) throw new Error(`${this.command} on ${this.port} was never started`);
    return this.current;
  }

  running(): boolean {
    const child = this.current;
    return child !== undefined && child.pid !== undefined && child.exitCode === null && child.signalCode === null;
  }

  pause(): Promise<void> {
    return pauseProcess(this.child);
  }

  resume(): void {
    resumeProcess(this.child);
  }

  async start(): Promise<void> {
    if (this.running()) throw new Error(`${this.command} on ${this.port} runs already`);
    const child = spawn(this.command, this.args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.current = child;
    const keep = (chunk: Buffer) => void this.output.push(chunk.toString());
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    let failed: Error | undefined;
    child.on('error', (error) => {
      failed ??= error;
      this.output.push(`${this.command}: ${error.message}\n`);
    });
    // A spawn that fails (not installed) says so on the next tick.
    await new Promise((resolve) => setImmediate(resolve));
    const deadline = Date.now() + START_TIMEOUT_MS;
    try {
      for (;;) {
        // A process that ends (or never starts) before it listens fails the start at once, with what it said.
        if (failed) throw new Error(`${this.command} did not start: ${failed.message}`);
        if (!this.running())
          throw new Error(`${this.command} ended (${child.exitCode ?? child.signalCode}) before it listened on ${this.port}\n${this.output.join('')}`);
        if (await accepts(this.port)) return;
        if (Date.now() > deadline)
          throw new Error(`${this.command} did not listen on 127.0.0.1:${this.port} within ${START_TIMEOUT_MS} ms\n${this.output.join('')}`);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    } catch (error) {
      await this.kill();
      throw error;
    }
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const child = this.current;
    if (!child || !this.running()) return;
    const exited = once(child, 'exit');
    // A paused server (SIGSTOP) would not act on a SIGTERM until it is let go.
    child.kill('SIGCONT');
    child.kill(signal);
    await exited;
  }

  kill(): Promise<void> {
    return this.stop('SIGKILL');
  }

  async remove(): Promise<void> {
    await this.kill();
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }

  async reload(): Promise<void> {
    const from = this.output.join('').length;
    this.child.kill('SIGHUP');
    const outcome = await waitFor(
      () => {
        const since = this.output.join('').slice(from);
        const failed = /Failed to reload server configuration: .*/.exec(since);
        if (failed) return { failed: failed[0] };
        return since.includes('Reloaded server configuration') ? { failed: null } : undefined;
      },
      `${this.command} on ${this.port} to report a reload`,
      { timeoutMs: 5_000, everyMs: 20 },
    );
    if (outcome.failed !== null) throw new Error(`${this.command} refused the reload: ${outcome.failed}`);
  }
}

async function started(server: ServerProcess): Promise<ServerProcess> {
  try {
    await server.start();
  } catch (error) {
    await server.remove();
    throw error;
  }
  return server;
}

export interface NatsServerOptions {
  /** Its port (default {@link freePort}): pick it first where a configuration file names it. */
  port?: number;
  /** A configuration file (`-c`); the port and the loopback address given on the command line win over its `listen`. */
  config?: string;
  /** JetStream on, its store in a temporary folder of the server's own (deleted by `remove`). */
  jetstream?: boolean;
  /** More command-line arguments (cluster settings, a server name…). */
  args?: readonly string[];
  /** A monitoring port of its own (`-m`, on a {@link freePort}), as {@link PrivateServer.monitorPort}. */
  monitor?: boolean;
}

/** Start a nats-server of the test's own on 127.0.0.1 and wait until it listens. */
export async function startNatsServer(options: NatsServerOptions = {}): Promise<PrivateNatsServer> {
  const port = options.port ?? (await freePort());
  const monitorPort = options.monitor ? await freePort() : null;
  const dir = options.jetstream ? mkdtempSync(join(tmpdir(), 'baton-nats-server-')) : undefined;
  const args = [
    '-a',
    '127.0.0.1',
    '-p',
    String(port),
    ...(monitorPort !== null ? ['-m', String(monitorPort)] : []),
    ...(dir !== undefined ? ['-js', '-sd', dir] : []),
    ...(options.config !== undefined ? ['-c', options.config] : []),
    ...(options.args ?? []),
  ];
  return started(new ServerProcess('nats-server', port, `nats://127.0.0.1:${port}`, args, dir, monitorPort));
}

export interface RedisServerOptions {
  /** Its port (default {@link freePort}). */
  port?: number;
  /** More arguments (`--enable-debug-command yes`…). */
  args?: readonly string[];
}

/** Start a redis-server of the test's own on 127.0.0.1 (no persistence, its dir a temporary folder) and wait until it listens. */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<PrivateServer> {
  const port = options.port ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), 'baton-redis-server-'));
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...(options.args ?? [])];
  return started(new ServerProcess('redis-server', port, `redis://127.0.0.1:${port}`, args, dir));
}

/** Private nats-servers routed to each other as one JetStream cluster. */
export interface PrivateNatsCluster {
  /** The nodes started, in order: node i (from 0) is the server named `n<i + 1>`. */
  nodes: PrivateNatsServer[];
  /** Every node's URL, comma-separated: a NATS_URL. */
  natsUrl: string;
  /** Kill every node and delete their stores. */
  remove(): Promise<void>;
}

export interface NatsClusterOptions {
  /** How many nodes the cluster has (default 3). */
  size?: number;
  /** The cluster's name (default `baton-test`). */
  name?: string;
  /**
   * How many of them to start (default all), the first ones: the others are routed to but never
   * run, as nodes the cluster lost. One node of three is NATS that answers with no JetStream meta
   * leader (no quorum).
   */
  started?: number;
  /** Wait until JetStream answers (the cluster elected a meta leader); default: when every node is started. */
  jetStreamReady?: boolean;
  /** Give every node a monitoring port ({@link NatsServerOptions.monitor}). */
  monitor?: boolean;
}

/**
 * Start a cluster of `size` (default 3) nats-servers with JetStream on free loopback ports, each
 * routed to the others (all of them, or the first `started`), and wait until JetStream answers
 * (the cluster elected a meta leader) unless told otherwise.
 */
export async function startNatsCluster(options: NatsClusterOptions = {}): Promise<PrivateNatsCluster> {
  const size = options.size ?? 3;
  const start = options.started ?? size;
  const ports: number[] = [];
  const routes: number[] = [];
  for (let i = 0; i < size; i++) ports.push(await freePort());
  for (let i = 0; i < size; i++) routes.push(await freePort());
  const nodes: PrivateNatsServer[] = [];
  const remove = async () => {
    for (const node of nodes) await node.remove();
  };
  try {
    for (let i = 0; i < start; i++) {
      const others = routes.filter((_, j) => j !== i).map((p) => `nats://127.0.0.1:${p}`);
      const args = [
        '-server_name',
        `n${i + 1}`,
        '-cluster',
        `nats://127.0.0.1:${routes[i]}`,
        '-cluster_name',
        options.name ?? 'baton-test',
        '-routes',
        others.join(','),
      ];
      nodes.push(await startNatsServer({ port: ports[i]!, jetstream: true, args, monitor: options.monitor }));
    }
    const urls = nodes.map((node) => node.url);
    if (options.jetStreamReady ?? start === size)
      await waitFor(
        async () => {
          const handle = await connectNats({ servers: urls, reconnect: false, timeoutMs: 2_000 });
          await handle.close();
          return true;
        },
        'the private cluster to elect a JetStream meta leader',
        { timeoutMs: 30_000, everyMs: 250 },
      );
    return { nodes, natsUrl: urls.join(','), remove };
  } catch (error) {
    await remove();
    throw error;
  }
}
