import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@baton/testing';
import { findListeningProcess } from './listener';
import { brokerProcesses, cpuFigures, readCpu, serverProcess } from './platform';

/** A server this test started: its port, its process, its data directory. */
interface Started {
  port: number;
  child: ChildProcess;
  dir: string;
}

async function waitPort(port: number, child: ChildProcess, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`the server on ${port} exited with ${child.exitCode}`);
    const ok = await new Promise<boolean>((resolve) => {
      const socket = tcpConnect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`nothing listens on 127.0.0.1:${port} after ${timeoutMs} ms`);
}

async function start(command: string, args: (port: number, dir: string) => string[]): Promise<Started> {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'bench-listener-'));
  const child = spawn(command, args(port, dir), { stdio: 'ignore' });
  await waitPort(port, child);
  return { port, child, dir };
}

async function stop(server: Started | undefined): Promise<void> {
  if (!server) return;
  if (server.child.exitCode === null && server.child.signalCode === null) {
    const exited = once(server.child, 'exit');
    server.child.kill('SIGKILL');
    await exited;
  }
  await rm(server.dir, { recursive: true, force: true });
}

const comm = async (pid: number) => (await readFile(`/proc/${pid}/comm`, 'utf8')).trim();

/**
 * The machine's nats-server (NATS_URL) plus two more this test starts on free loopback ports, and
 * a second redis-server: the bench must account the process listening where it connects, not the
 * first one with the right name.
 */
describe('the bench finds its servers by port (real servers)', () => {
  const machineNats = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
  let natsA: Started | undefined;
  let natsB: Started | undefined;
  let redis: Started | undefined;

  beforeAll(async () => {
    const nats = (port: number, dir: string) => ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir];
    [natsA, natsB, redis] = await Promise.all([
      start('nats-server', nats),
      start('nats-server', nats),
      start('redis-server', (port, dir) => ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir]),
    ]);
  }, 30_000);

  afterAll(async () => {
    await Promise.all([stop(natsA), stop(natsB), stop(redis)]);
  });

  it('names the pid listening on each port, whichever nats-server came first', async () => {
    const a = natsA as Started;
    const b = natsB as Started;
    const r = redis as Started;
    expect(serverProcess(`nats://127.0.0.1:${a.port}`, 4222)).toEqual({ pid: a.child.pid, via: 'proc' });
    expect(serverProcess(`nats://127.0.0.1:${b.port}`, 4222)).toEqual({ pid: b.child.pid, via: 'proc' });
    expect(brokerProcesses({ nats: `nats://localhost:${b.port}`, redis: `redis://127.0.0.1:${r.port}` })).toEqual({
      'nats-server': { pid: b.child.pid, via: 'proc' },
      'redis-server': { pid: r.child.pid, via: 'proc' },
    });

    // The machine's own server is a third nats-server, neither of ours.
    const machine = serverProcess(machineNats, 4222);
    expect(machine.pid).not.toBeNull();
    expect([a.child.pid, b.child.pid]).not.toContain(machine.pid);
    expect(await comm(machine.pid as number)).toBe('nats-server');
  });

  it('ss -ltnp, where it is installed, names the same pids', () => {
    const a = natsA as Started;
    const r = redis as Started;
    const viaSs = (url: string, port: number) => findListeningProcess(url, port, { procRoot: '/nonexistent' });
    const ssA = viaSs(`nats://127.0.0.1:${a.port}`, 4222);
    if (ssA.pid === null && /no ss/.test(ssA.reason)) return; // ss is not installed here
    expect(ssA).toEqual({ pid: a.child.pid, via: 'ss' });
    expect(viaSs(`redis://127.0.0.1:${r.port}`, 6379)).toEqual({ pid: r.child.pid, via: 'ss' });
  });

  it('refuses a port nobody listens on and a server that went away, instead of reporting a number', async () => {
    const closed = await freePort();
    expect(serverProcess(`nats://127.0.0.1:${closed}`, 4222)).toEqual({ pid: null, reason: `no process listens on 127.0.0.1:${closed}` });

    const b = natsB as Started;
    const target = { 'nats-server': serverProcess(`nats://127.0.0.1:${b.port}`, 4222) };
    const before = readCpu(target);
    await stop(b);
    natsB = undefined;
    const figures = cpuFigures(before, readCpu(target), 100, 1000);
    expect(figures.values['nats-server']).toBeNull();
    expect(figures.not_measured['nats-server']).toMatch(/cannot read \/proc\/\d+\/stat/);
  });
});
