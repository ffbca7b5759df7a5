import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/*
 * A server of the test's own (redis-server, nats-server) on a free loopback port, in a temp dir:
 * what a test that pauses or kills a server runs, so the shared servers other tests use are never
 * touched.
 */

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  server.close();
  await once(server, 'close');
  return port;
}

async function waitPort(name: string, port: number, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    await sleep(100);
  }
  throw new Error(`${name} did not listen on ${port}`);
}

/** A private server: its URL, its process (SIGSTOP / SIGCONT it), and `remove` (kill it, delete its dir). */
export interface PrivateServer {
  url: string;
  child: ChildProcess;
  remove(): Promise<void>;
}

/** Start `kind` with its own data dir on a free loopback port and wait until it listens. */
export async function startPrivateServer(kind: 'redis-server' | 'nats-server'): Promise<PrivateServer> {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), `baton-${kind}-`));
  const args =
    kind === 'redis-server'
      ? ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir]
      : ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir];
  const child = spawn(kind, args, { stdio: 'ignore' });
  const remove = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = once(child, 'exit');
      child.kill('SIGCONT');
      child.kill('SIGKILL');
      await exited;
    }
    await rm(dir, { recursive: true, force: true }).catch(() => undefined);
  };
  try {
    await waitPort(kind, port);
  } catch (error) {
    await remove();
    throw error;
  }
  return { url: `${kind === 'redis-server' ? 'redis' : 'nats'}://127.0.0.1:${port}`, child, remove };
}
