import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectNats, onConnectionEvent, type ConnectionEvent, type NatsHandle } from '@baton/eventstore';
import { waitFor } from '@baton/wait';
// Test only: the private nats-servers every project's specs share (not part of @baton/eventstore's API).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startNatsServer, type PrivateNatsServer } from '../../../eventstore/src/int/servers';
import { watchConnection } from './connection-watch';

/*
 * A nats-server that freezes (SIGSTOP: a stalled VM, a process stopped by hand) keeps its sockets
 * open: the client notices only after its unanswered pings. Then:
 * - `down_ms` of the back line counts from when the server was last heard, not from that notice;
 * - the reconnect dials the client gave up on while the server was frozen (the kernel completed their
 *   TCP handshakes) must not come back to life when the server thaws: the server closes them after
 *   its authentication timeout, and that close used to be taken for the loss of the live connection
 *   (every service dropped and reconnected once more, that timeout after the thaw).
 * The server requires a user (as Baton's do: credentials), with an authentication timeout of 1 s.
 */

type Line = { level: string; message: string; fields: Record<string, unknown> };

const PING_MS = 500;
const FREEZE_MS = 8_000;
const AUTH_TIMEOUT_S = 1;

describe('watchConnection across a frozen nats-server (SIGSTOP, then SIGCONT)', () => {
  let dir: string;
  let server: PrivateNatsServer;
  let handle: NatsHandle;
  const lines: Line[] = [];
  // What an SDK agent's `connectionEvents()` hears of the same connection.
  const events: ConnectionEvent[] = [];
  let stopEvents = () => undefined as void;
  const log = {
    info: (message: string, fields: Record<string, unknown>) => lines.push({ level: 'info', message, fields }),
    warn: (message: string, fields: Record<string, unknown>) => lines.push({ level: 'warn', message, fields }),
    error: (message: string, fields: Record<string, unknown>) => lines.push({ level: 'error', message, fields }),
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'baton-freeze-'));
    const config = join(dir, 'nats-server.conf');
    writeFileSync(config, `authorization {\n  user: svc\n  password: pw\n  timeout: ${AUTH_TIMEOUT_S}\n}\n`);
    server = await startNatsServer({ config });
    handle = await connectNats({
      servers: server.url,
      user: 'svc',
      pass: 'pw',
      checkJetStream: false,
      pingIntervalMs: PING_MS,
      // Several dials given up on during the freeze.
      reconnectDialTimeoutMs: 1000,
    });
    watchConnection(handle, log, { stopping: () => false, onClosed: () => undefined, stillDownEveryMs: 60_000 });
    stopEvents = onConnectionEvent(handle, (event) => events.push(event));
  });
  afterAll(async () => {
    stopEvents();
    await handle.close();
    server.resume();
    await server.remove();
    rmSync(dir, { recursive: true, force: true });
  });

  it('one loss, one return: down_ms covers the whole freeze, and no second loss after the thaw (the abandoned dials stay dead)', async () => {
    // Something heard just before the freeze.
    await handle.connection.flush();
    const frozenAt = Date.now();
    await server.pause();
    await waitFor(() => lines.some((line) => line.message === 'NATS connection lost; reconnecting'), 'the lost line', { timeoutMs: FREEZE_MS });
    const lost = lines.find((line) => line.message === 'NATS connection lost; reconnecting')!;
    // Noticed after the unanswered pings; silent since the freeze.
    expect(lost.fields['silent_ms']).toBeGreaterThanOrEqual(PING_MS);
    await new Promise((resolve) => setTimeout(resolve, frozenAt + FREEZE_MS - Date.now()));
    server.resume();
    await waitFor(() => lines.some((line) => line.message === 'NATS connection back'), 'the back line', { timeoutMs: 10_000 });
    const back = lines.find((line) => line.message === 'NATS connection back')!;
    // From the last contact (before the freeze), not from the notice (a ping interval or two later).
    expect(back.fields['down_ms']).toBeGreaterThanOrEqual(FREEZE_MS - 100);
    // The connection events count the same way (an agent's `reconnected.downMs`).
    const reconnected = events.find((event) => event.kind === 'reconnected');
    expect(reconnected?.kind === 'reconnected' ? reconnected.downMs : null).toBeGreaterThanOrEqual(FREEZE_MS - 100);

    // Past the server's authentication timeout for the dials given up on: still one loss, one return.
    await new Promise((resolve) => setTimeout(resolve, AUTH_TIMEOUT_S * 1000 + 2_000));
    expect(lines.map((line) => line.message)).toEqual(['NATS connection lost; reconnecting', 'NATS connection back']);
    await handle.connection.flush();
  }, 40_000);
});
