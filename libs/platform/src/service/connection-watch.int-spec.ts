import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectNats, onConnectionEvent, type NatsHandle } from '@baton/eventstore';
import { waitFor } from '@baton/wait';
// Test only: the private nats-servers every project's specs share (not part of @baton/eventstore's API).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startNatsServer, type PrivateNatsServer } from '../../../eventstore/src/int/servers';
import { watchConnection } from './connection-watch';

/*
 * What a service logs about its NATS connection, against a nats-server this spec starts, stops
 * (SIGTERM, as an operator or a crash would) and starts again on the same port.
 */

type Line = { level: string; message: string; fields: Record<string, unknown> };

describe('watchConnection: a service says when NATS goes away and when it is back (a real nats-server, stopped and started again)', () => {
  let server: PrivateNatsServer;
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
    server = await startNatsServer();
    handle = await connectNats({ servers: server.url, checkJetStream: false, reconnect: true });
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
    await server.remove();
  });

  it('lost: a warn naming the server; still down: a warn with how long and the attempts; back: an info with down_ms', async () => {
    await server.stop();
    await waitFor(() => lines.length >= 1, 'the lost line');
    // A server that exits closes the socket: the loss is seen at once (silent_ms: since the server was last heard).
    expect(lines[0]).toEqual({
      level: 'warn',
      message: 'NATS connection lost; reconnecting',
      fields: { server: `127.0.0.1:${server.port}`, silent_ms: expect.any(Number) as number },
    });

    await waitFor(() => lines.some((line) => line.message === 'NATS still unreachable; reconnecting'), 'a still-down line', { timeoutMs: 8_000 });
    const still = lines.find((line) => line.message === 'NATS still unreachable; reconnecting')!;
    expect(still.level).toBe('warn');
    expect(still.fields).toMatchObject({ down_ms: expect.any(Number), attempts: expect.any(Number) });
    expect(still.fields['down_ms']).toBeGreaterThanOrEqual(1_000);

    await server.start();
    await waitFor(() => lines.some((line) => line.message === 'NATS connection back'), 'the back line');
    const back = lines.find((line) => line.message === 'NATS connection back')!;
    expect(back.level).toBe('info');
    expect(back.fields).toMatchObject({ server: `127.0.0.1:${server.port}`, attempts: expect.any(Number) });
    expect(back.fields['down_ms']).toBeGreaterThanOrEqual(1_000);
    await handle.connection.flush();
    expect(closed).toEqual([]);
  }, 30_000);

  it('a flapping link: at most linesPerMinute lost / back lines a minute; the next line written says how many were left out', async () => {
    const flapLines = () => lines.filter((line) => line.message === 'NATS connection lost; reconnecting' || line.message === 'NATS connection back');
    expect(flapLines()).toHaveLength(2);
    // Count the connection's reconnects, to know when each flap is over; the counting stops when the test ends.
    let backs = 0;
    const stopCounting = onConnectionEvent(handle, (event) => {
      if (event.kind === 'reconnected') backs++;
    });
    try {
      for (let flap = 1; flap <= 2; flap++) {
        await server.stop();
        await server.start();
        await waitFor(() => backs >= flap, `reconnect ${flap}`, { timeoutMs: 15_000 });
      }
      // 3 lines allowed this minute: the lost line of the first flap; its back line and the second flap's two are left out.
      expect(flapLines()).toHaveLength(3);
      offset += 60_000;
      await server.stop();
      await waitFor(() => flapLines().length === 4, 'the lost line of the next minute');
      expect(flapLines()[3]).toEqual({
        level: 'warn',
        message: 'NATS connection lost; reconnecting',
        fields: { server: `127.0.0.1:${server.port}`, silent_ms: expect.any(Number) as number, suppressed: 3 },
      });
      await server.start();
      await waitFor(() => flapLines().length === 5, 'back', { timeoutMs: 15_000 });
      expect(flapLines()[4]!.fields).not.toHaveProperty('suppressed');
    } finally {
      stopCounting();
    }
  }, 60_000);
});

describe('watchConnection: what the server refuses on an open connection is said with its words (a real nats-server with permissions)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'baton-watch-'));
  let server: PrivateNatsServer;
  let handle: NatsHandle;
  const lines: Line[] = [];
  const log = {
    info: (message: string, fields: Record<string, unknown>) => lines.push({ level: 'info', message, fields }),
    warn: (message: string, fields: Record<string, unknown>) => lines.push({ level: 'warn', message, fields }),
    error: (message: string, fields: Record<string, unknown>) => lines.push({ level: 'error', message, fields }),
  };

  beforeAll(async () => {
    const config = join(dir, 'server.conf');
    writeFileSync(
      config,
      'authorization { users = [ { user: svc, password: pw, permissions: { publish: { allow: ["ok.>"] }, subscribe: { allow: ["_INBOX.>"] } } } ] }\n',
    );
    server = await startNatsServer({ config });
    handle = await connectNats({ servers: server.url, user: 'svc', pass: 'pw', checkJetStream: false, reconnect: false });
    watchConnection(handle, log, { stopping: () => false, onClosed: () => undefined });
  });
  afterAll(async () => {
    await handle.close();
    await server.remove();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a publish the server forbids: one error line with the server’s text and the client’s code, and the connection stays', async () => {
    handle.connection.publish('denied.here', new Uint8Array(0));
    await waitFor(() => lines.length >= 1, 'the error line');
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
