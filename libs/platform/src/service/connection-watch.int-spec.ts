import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, createServer, type AddressInfo } from 'node:net';
import { connectNats, type NatsHandle } from '@baton/eventstore';
import { watchConnection } from './connection-watch';

/*
 * What a service logs about its NATS connection, against a nats-server this spec starts, stops
 * (SIGTERM, as an operator or a crash would) and starts again on the same port.
 */

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function listening(port: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port });
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`nats-server did not listen on ${port}`);
}

async function startServer(port: number, config?: string): Promise<ChildProcess> {
  const child = spawn('nats-server', ['-a', '127.0.0.1', '-p', String(port), ...(config !== undefined ? ['-c', config] : [])], { stdio: 'ignore' });
  await listening(port);
  return child;
}

async function stopServer(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill(signal);
  await exited;
}

type Line = { level: string; message: string; fields: Record<string, unknown> };

async function until(what: string, probe: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe('watchConnection: a service says when NATS goes away and when it is back (a real nats-server, stopped and started again)', () => {
  let port: number;
  let server: ChildProcess;
  let handle: NatsHandle;
  const lines: Line[] = [];
  let offset = 0;
  const log = {
    info: (message: string, fields: Record<string, unknown>) => lines.push({ level: 'info', message, fields }),
    warn: (message: string, fields: Record<string, unknown>) => lines.push({ level: 'warn', message, fields }),
    error: (message: string, fields: Record<string, unknown>) => lines.push({ level: 'error', message, fields }),
  };
  const closed: unknown[] = [];

  beforeAll(async () => {
    port = await freePort();
    server = await startServer(port);
    handle = await connectNats({ servers: `nats://127.0.0.1:${port}`, checkJetStream: false, reconnect: true });
    watchConnection(handle, log, {
      stopping: () => false,
      onClosed: (error) => closed.push(error),
      stillDownEveryMs: 1_000,
      linesPerMinute: 3,
      now: () => Date.now() + offset,
    });
  });
  afterAll(async () => {
    await handle.close();
    await stopServer(server, 'SIGKILL');
  });

  it('lost: a warn naming the server; still down: a warn with how long and the attempts; back: an info with down_ms', async () => {
    await stopServer(server);
    await until('the lost line', () => lines.length >= 1);
    expect(lines[0]).toEqual({ level: 'warn', message: 'NATS connection lost; reconnecting', fields: { server: `127.0.0.1:${port}` } });

    await until('a still-down line', () => lines.some((line) => line.message === 'NATS still unreachable; reconnecting'), 8_000);
    const still = lines.find((line) => line.message === 'NATS still unreachable; reconnecting')!;
    expect(still.level).toBe('warn');
    expect(still.fields).toMatchObject({ down_ms: expect.any(Number), attempts: expect.any(Number) });
    expect(still.fields['down_ms']).toBeGreaterThanOrEqual(1_000);

    server = await startServer(port);
    await until('the back line', () => lines.some((line) => line.message === 'NATS connection back'));
    const back = lines.find((line) => line.message === 'NATS connection back')!;
    expect(back.level).toBe('info');
    expect(back.fields).toMatchObject({ server: `127.0.0.1:${port}`, attempts: expect.any(Number) });
    expect(back.fields['down_ms']).toBeGreaterThanOrEqual(1_000);
    await handle.connection.flush();
    expect(closed).toEqual([]);
  }, 30_000);

  it('a flapping link: at most linesPerMinute lost / back lines a minute; the next line written says how many were left out', async () => {
    const flapLines = () => lines.filter((line) => line.message === 'NATS connection lost; reconnecting' || line.message === 'NATS connection back');
    expect(flapLines()).toHaveLength(2);
    const backs = () => handleBacks;
    let handleBacks = 0;
    // Count reconnects from the client itself, to know when each flap is over.
    void (async () => {
      for await (const status of handle.connection.status()) if (status.type === 'reconnect') handleBacks++;
    })();
    for (let flap = 1; flap <= 2; flap++) {
      await stopServer(server);
      server = await startServer(port);
      await until(`reconnect ${flap}`, () => backs() >= flap, 15_000);
    }
    // 3 lines allowed this minute: the lost line of the first flap; its back line and the second flap's two are left out.
    expect(flapLines()).toHaveLength(3);
    offset += 60_000;
    await stopServer(server);
    await until('the lost line of the next minute', () => flapLines().length === 4);
    expect(flapLines()[3]).toEqual({ level: 'warn', message: 'NATS connection lost; reconnecting', fields: { server: `127.0.0.1:${port}`, suppressed: 3 } });
    server = await startServer(port);
    await until('back', () => flapLines().length === 5, 15_000);
    expect(flapLines()[4]!.fields).not.toHaveProperty('suppressed');
  }, 60_000);
});

describe('watchConnection: what the server refuses on an open connection is said with its words (a real nats-server with permissions)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'baton-watch-'));
  let server: ChildProcess;
  let handle: NatsHandle;
  const lines: Line[] = [];
  const log = {
    info: (message: string, fields: Record<string, unknown>) => lines.push({ level: 'info', message, fields }),
    warn: (message: string, fields: Record<string, unknown>) => lines.push({ level: 'warn', message, fields }),
    error: (message: string, fields: Record<string, unknown>) => lines.push({ level: 'error', message, fields }),
  };

  beforeAll(async () => {
    const port = await freePort();
    const config = join(dir, 'server.conf');
    writeFileSync(
      config,
      'authorization { users = [ { user: svc, password: pw, permissions: { publish: { allow: ["ok.>"] }, subscribe: { allow: ["_INBOX.>"] } } } ] }\n',
    );
    server = await startServer(port, config);
    handle = await connectNats({ servers: `nats://127.0.0.1:${port}`, user: 'svc', pass: 'pw', checkJetStream: false, reconnect: false });
    watchConnection(handle, log, { stopping: () => false, onClosed: () => undefined });
  });
  afterAll(async () => {
    await handle.close();
    await stopServer(server, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('a publish the server forbids: one error line with the server’s text and the client’s code, and the connection stays', async () => {
    handle.connection.publish('denied.here', new Uint8Array(0));
    await until('the error line', () => lines.length >= 1);
    expect(lines).toEqual([
      {
        level: 'error',
        message: expect.stringMatching(/^NATS server error: Permissions Violation for Publish to "denied\.here"/),
        fields: { nats_code: 'PERMISSIONS_VIOLATION', said: expect.stringContaining('denied.here') },
      },
    ]);
    expect(handle.connection.isClosed()).toBe(false);
  });
});
