import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@baton/wait';
import { connectNats, type NatsHandle } from './connection';
import { connectionEvents, onConnectionEvent, serverErrorAbout, type ConnectionEvent } from './connection-events';
import { ConnectionClosed } from './errors';
import { startNatsServer, type PrivateNatsServer } from './int/servers';

/*
 * A connection's events against a nats-server of this spec's own, on a free port (never the shared
 * 4222), stopped (SIGTERM, as an operator or a crash would) and started again on the same port:
 * dropped, reconnecting, back, reconnects exhausted, the server's errors in its words. Several
 * consumers each read every event; a listener that throws breaks nothing.
 */

/** Read every event of an iterator into an array until it ends; resolves then. */
function collect(events: AsyncIterable<ConnectionEvent>): { seen: ConnectionEvent[]; ended: Promise<void> } {
  const seen: ConnectionEvent[] = [];
  const ended = (async () => {
    for await (const event of events) seen.push(event);
  })();
  return { seen, ended };
}

describe('connectionEvents / onConnectionEvent: a connection dropped, reconnecting and back (a nats-server of its own, stopped and started again)', () => {
  let server: PrivateNatsServer;
  let handle: NatsHandle;

  beforeAll(async () => {
    server = await startNatsServer();
    handle = await connectNats({ servers: server.url, checkJetStream: false });
  });
  afterAll(async () => {
    await handle?.close();
    await server?.remove();
  });

  it('every consumer reads disconnected, reconnecting (attempt, downMs) and reconnected (downMs, attempts); a throwing listener breaks nothing', async () => {
    const first = collect(connectionEvents(handle));
    const second = collect(connectionEvents(handle));
    const heard: ConnectionEvent[] = [];
    const thrown: Array<{ error: unknown; kind: string }> = [];
    onConnectionEvent(
      handle,
      (event) => {
        throw new Error(`listener broke on ${event.kind}`);
      },
      { onListenerError: (error, event) => thrown.push({ error, kind: event.kind }) },
    );
    onConnectionEvent(handle, async () => Promise.reject(new Error('rejected')), {
      onListenerError: (error, event) => thrown.push({ error, kind: event.kind }),
    });
    onConnectionEvent(handle, (event) => void heard.push(event));

    const server_ = `127.0.0.1:${server.port}`;
    await server.stop();
    await waitFor(() => heard.filter((event) => event.kind === 'reconnecting').length >= 2, 'two reconnect attempts', { timeoutMs: 15_000 });
    expect(heard[0]).toEqual({ kind: 'disconnected', server: server_, at: expect.any(Number) });
    expect(heard[1]).toEqual({ kind: 'reconnecting', server: server_, attempt: 1, downMs: expect.any(Number), at: expect.any(Number) });
    expect(heard[2]).toMatchObject({ kind: 'reconnecting', attempt: 2 });
    expect((heard[2] as { downMs: number }).downMs).toBeGreaterThanOrEqual(1_000);

    await server.start();
    await waitFor(() => heard.some((event) => event.kind === 'reconnected'), 'the reconnected event', { timeoutMs: 15_000 });
    const back = heard.find((event) => event.kind === 'reconnected')!;
    expect(back).toEqual({ kind: 'reconnected', server: server_, downMs: expect.any(Number), attempts: expect.any(Number), at: expect.any(Number) });
    expect(back.kind === 'reconnected' && back.downMs).toBeGreaterThanOrEqual(1_000);
    expect(back.kind === 'reconnected' && back.attempts).toBe(heard.filter((event) => event.kind === 'reconnecting').length);
    // One outage, one disconnected; each consumer read the same events, frozen.
    expect(heard.filter((event) => event.kind === 'disconnected')).toHaveLength(1);
    await waitFor(() => first.seen.length === heard.length && second.seen.length === heard.length, 'both iterators to catch up');
    expect(first.seen).toEqual(heard);
    expect(second.seen).toEqual(heard);
    expect(Object.isFrozen(back)).toBe(true);
    // The throwing and rejecting listeners were called for every event, each failure reported, and the connection works.
    await waitFor(() => thrown.length === heard.length * 2, 'every listener failure reported');
    expect(thrown.filter((entry) => (entry.error as Error).message.startsWith('listener broke on'))).toHaveLength(heard.length);
    await handle.connection.flush();
    expect(handle.connection.isClosed()).toBe(false);

    // Closed on purpose: `closed` without an error, the last event; the iterators end.
    await handle.close();
    await Promise.all([first.ended, second.ended]);
    expect(first.seen.at(-1)).toEqual({ kind: 'closed', at: expect.any(Number) });
    expect(second.seen.at(-1)).toEqual(first.seen.at(-1));
    await waitFor(() => heard.at(-1)?.kind === 'closed', 'the listener told closed');
  }, 45_000);

  it('on a closed connection: an iterator yields closed and ends, a listener is called with closed alone', async () => {
    const late = collect(connectionEvents(handle));
    await late.ended;
    expect(late.seen).toEqual([{ kind: 'closed', at: expect.any(Number) }]);
    const heard: ConnectionEvent[] = [];
    onConnectionEvent(handle, (event) => void heard.push(event));
    await waitFor(() => heard.length === 1, 'closed told to a late listener');
    expect(heard).toEqual(late.seen);
  });
});

describe('connectionEvents: reconnects exhausted (maxReconnectAttempts), break and abort', () => {
  let server: PrivateNatsServer;
  let handle: NatsHandle;

  beforeAll(async () => {
    server = await startNatsServer();
  });
  afterAll(async () => {
    await handle?.close();
    await server?.remove();
  });

  it('maxReconnectAttempts outside -1 or a whole number from 1: RangeError before connecting', async () => {
    for (const maxReconnectAttempts of [0, -2, 1.5, Number.NaN]) {
      await expect(connectNats({ servers: server.url, checkJetStream: false, maxReconnectAttempts })).rejects.toThrow(RangeError);
    }
  });

  it('past its attempts the client gives up: closed carries the typed ConnectionClosed (reconnects_exhausted), the same as handle.closed, and the iteration ends', async () => {
    handle = await connectNats({ servers: server.url, checkJetStream: false, maxReconnectAttempts: 2 });
    const all = collect(connectionEvents(handle));
    // A consumer that breaks after the first event, and one whose signal aborts: both end, unsubscribed.
    const broke: ConnectionEvent[] = [];
    const breaking = (async () => {
      for await (const event of connectionEvents(handle)) {
        broke.push(event);
        break;
      }
    })();
    const abort = new AbortController();
    const aborted = collect(connectionEvents(handle, { signal: abort.signal }));
    abort.abort();
    await aborted.ended;
    expect(aborted.seen).toEqual([]);

    await server.stop();
    await all.ended;
    await breaking;
    expect(all.seen.map((event) => event.kind)).toEqual(['disconnected', 'reconnecting', 'reconnecting', 'closed']);
    expect(all.seen.slice(1, 3).map((event) => event.kind === 'reconnecting' && event.attempt)).toEqual([1, 2]);
    const closed = all.seen[3]!;
    const error = closed.kind === 'closed' ? closed.error : undefined;
    expect(error).toBeInstanceOf(ConnectionClosed);
    expect(error).toMatchObject({ code: 'connection_closed', reason: 'reconnects_exhausted', natsCode: 'CONNECTION_REFUSED' });
    await expect(handle.closed).resolves.toBe(error);
    expect(broke.map((event) => event.kind)).toEqual(['disconnected']);
  }, 30_000);
});

describe('connectionEvents: the server’s errors in its words (a nats-server with permissions)', () => {
  let dir: string;
  let server: PrivateNatsServer | undefined;
  let handle: NatsHandle;

  // Made in beforeAll, not when the file loads: a run that filters this block out leaves no dir.
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'baton-connection-events-'));
    const config = join(dir, 'server.conf');
    writeFileSync(
      config,
      'authorization { users = [ { user: svc, password: pw, permissions: { publish: { allow: ["ok.>"] }, subscribe: { allow: ["_INBOX.>"] } } } ] }\n',
    );
    server = await startNatsServer({ config });
    handle = await connectNats({ servers: server.url, user: 'svc', pass: 'pw', checkJetStream: false, reconnect: false });
  });
  afterAll(async () => {
    await handle?.close();
    await server?.remove();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a publish the server forbids: server_error with the client’s code, the server’s text, about other; the connection stays', async () => {
    const events = collect(connectionEvents(handle));
    handle.connection.publish('denied.here', new Uint8Array(0));
    await waitFor(() => events.seen.length >= 1, 'the server_error event');
    expect(events.seen).toEqual([
      {
        kind: 'server_error',
        natsCode: 'PERMISSIONS_VIOLATION',
        said: expect.stringMatching(/^Permissions Violation for Publish to "denied\.here"/),
        about: 'other',
        at: expect.any(Number),
      },
    ]);
    expect(handle.connection.isClosed()).toBe(false);
  });

  it('serverErrorAbout: revoked or expired credentials are ended, an authorization violation refused, anything else other', () => {
    expect(serverErrorAbout('NATS_PROTOCOL_ERR', 'User Authentication Revoked')).toBe('credentials_ended');
    expect(serverErrorAbout('AUTHENTICATION_EXPIRED', 'User Authentication Expired')).toBe('credentials_ended');
    expect(serverErrorAbout('AUTHORIZATION_VIOLATION', 'Authorization Violation')).toBe('credentials_refused');
    expect(serverErrorAbout('PERMISSIONS_VIOLATION', 'Permissions Violation for Publish to "x"')).toBe('other');
  });
});

describe('a reconnect dial that never completes gives way after the reconnect dial bound, not the first connection’s', () => {
  it('the node accepts the socket and never speaks (a node mid-reload): the client dials again and is back within seconds', async () => {
    const server = await startNatsServer();
    // The first connection keeps its long bound; a reconnect dial is bounded shorter.
    const handle = await connectNats({ servers: server.url, checkJetStream: false, connectTimeoutMs: 20_000, reconnectDialTimeoutMs: 1_500 });
    const heard: ConnectionEvent[] = [];
    onConnectionEvent(handle, (event) => void heard.push(event));
    const held: import('node:net').Socket[] = [];
    try {
      await server.stop();
      // A listener that takes the client's reconnect and says nothing, then makes way for the server.
      const silent = createServer((socket) => void held.push(socket));
      await new Promise<void>((resolve) => silent.listen(server.port, '127.0.0.1', resolve));
      await waitFor(() => held.length > 0, 'the client dialing the silent node', { timeoutMs: 10_000 });
      // Stop listening; the accepted socket stays open (close's callback waits for it: not awaited).
      silent.close();
      await server.start();
      await waitFor(() => heard.some((event) => event.kind === 'reconnected'), 'reconnected', { timeoutMs: 30_000 });
      const back = heard.find((event) => event.kind === 'reconnected');
      // The silent dial was given up after 1.5 s (not 20 s), the next one reached the server.
      expect(back).toEqual(expect.objectContaining({ kind: 'reconnected' }));
      expect((back as { downMs: number }).downMs).toBeLessThan(10_000);
    } finally {
      for (const socket of held) socket.destroy();
      await handle.close();
      await server.remove();
    }
  }, 60_000);
});
