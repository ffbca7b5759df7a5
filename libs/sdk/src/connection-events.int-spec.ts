import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Principals } from '@baton/contracts';
import { ensureServiceCreds, issueCreds, openDeployment, revokeUsers, writeServerConfig } from '@baton/eventstore';
import { waitFor } from '@baton/wait';
// Test only: the private nats-servers every project's specs share (not part of @baton/eventstore's API).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { freePort, startNatsServer, type PrivateNatsServer } from '../../eventstore/src/int/servers';
import { ConnectionClosed, connectNats, createBatonClient, type BatonAgent, type ConnectionEvent, type NatsHandle } from './index';

/*
 * What an agent hears of its connection (`agent.connectionEvents()`, `onConnection`), against
 * nats-servers of this spec's own on free ports (never the shared 4222): stopped and started again
 * on the same port, stopped for good under a shared handle that gives up reconnecting, and
 * reloaded with the agent's credentials rotated, then revoked.
 */

const P = 'shop';

/** Read every event of an iterator into an array until it ends; resolves then. */
function collect(events: AsyncIterable<ConnectionEvent>): { seen: ConnectionEvent[]; ended: Promise<void> } {
  const seen: ConnectionEvent[] = [];
  const ended = (async () => {
    for await (const event of events) seen.push(event);
  })();
  return { seen, ended };
}

const kinds = (events: ConnectionEvent[]) => events.map((event) => event.kind);

describe('agent.connectionEvents() and onConnection (a nats-server of its own, stopped and started again on its port)', () => {
  let server: PrivateNatsServer;
  const clients: BatonAgent[] = [];
  const handles: NatsHandle[] = [];

  beforeAll(async () => {
    server = await startNatsServer();
  });
  afterAll(async () => {
    for (const client of clients) await client.close({ timeoutMs: 0 }).catch(() => undefined);
    for (const handle of handles) await handle.close().catch(() => undefined);
    await server?.remove();
  });

  it('its own connection: every reader and the listener hear disconnected, reconnecting, reconnected (downMs); a throwing listener breaks nothing; close() ends with closed', async () => {
    const heard: ConnectionEvent[] = [];
    const reported = jest.spyOn(console, 'error').mockImplementation(() => undefined);
    try {
      const agent = await createBatonClient({
        natsUrl: server.url,
        prefix: `ce${randomBytes(4).toString('hex')}`,
        project: P,
        agent: 'coder',
        onConnection: (event) => {
          heard.push(event);
          throw new Error(`listener broke on ${event.kind}`);
        },
      });
      clients.push(agent);
      const first = collect(agent.connectionEvents());
      const second = collect(agent.connectionEvents());

      await server.stop();
      await waitFor(() => heard.some((event) => event.kind === 'reconnecting'), 'a reconnect attempt', { timeoutMs: 15_000 });
      expect(heard[0]).toEqual({ kind: 'disconnected', server: `127.0.0.1:${server.port}`, at: expect.any(Number) });
      expect(heard[1]).toEqual({ kind: 'reconnecting', server: `127.0.0.1:${server.port}`, attempt: 1, downMs: expect.any(Number), at: expect.any(Number) });
      await new Promise((resolve) => setTimeout(resolve, 1_000));

      await server.start();
      await waitFor(() => heard.some((event) => event.kind === 'reconnected'), 'the reconnected event', { timeoutMs: 15_000 });
      const back = heard.find((event) => event.kind === 'reconnected');
      expect(back).toEqual({
        kind: 'reconnected',
        server: `127.0.0.1:${server.port}`,
        downMs: expect.any(Number),
        attempts: expect.any(Number),
        at: expect.any(Number),
      });
      expect(back?.kind === 'reconnected' && back.downMs).toBeGreaterThanOrEqual(1_000);
      // The listener threw at every event: each reported, none stopped the next one or the client.
      expect(reported.mock.calls.filter(([line]) => /onConnection threw on a \w+ event: listener broke on/.test(String(line)))).toHaveLength(heard.length);
      await expect(agent.ledger.openOffers(P)).resolves.toMatchObject({ ok: false, error: { code: 'no_responders' } });
      expect(heard.some((event) => event.kind === 'closed')).toBe(false);

      await agent.close();
      await Promise.all([first.ended, second.ended]);
      expect(kinds(first.seen)).toEqual(['disconnected', ...heard.slice(1, -2).map(() => 'reconnecting'), 'reconnected', 'closed']);
      expect(second.seen).toEqual(first.seen);
      expect(first.seen.at(-1)).toEqual({ kind: 'closed', at: expect.any(Number) });
      expect(heard).toEqual(first.seen);
      await expect(agent.closed).resolves.toBeUndefined();
      // Asked once closed: closed, and the end.
      const late = collect(agent.connectionEvents());
      await late.ended;
      expect(late.seen).toEqual([first.seen.at(-1)]);
    } finally {
      reported.mockRestore();
    }
  }, 45_000);

  it('a shared handle that gives up reconnecting: every client on it hears closed with the typed ConnectionClosed (reconnects_exhausted); a client closed before hears nothing more', async () => {
    const nats = await connectNats({ servers: server.url, checkJetStream: false, maxReconnectAttempts: 2 });
    handles.push(nats);
    const prefix = `ce${randomBytes(4).toString('hex')}`;
    const heardA: ConnectionEvent[] = [];
    const heardB: ConnectionEvent[] = [];
    const a = await createBatonClient({ nats, prefix, project: P, agent: 'alice', onConnection: (event) => void heardA.push(event) });
    const b = await createBatonClient({ nats, prefix, project: P, agent: 'bob', onConnection: (event) => void heardB.push(event) });
    clients.push(a, b);
    const readA = collect(a.connectionEvents());
    const readB = collect(b.connectionEvents());

    // Closing b leaves the shared connection open: b's reader ends, its listener is called no more.
    await b.close();
    await readB.ended;
    expect(readB.seen).toEqual([]);
    expect(nats.connection.isClosed()).toBe(false);

    await server.stop();
    await readA.ended;
    expect(kinds(readA.seen)).toEqual(['disconnected', 'reconnecting', 'reconnecting', 'closed']);
    const closed = readA.seen[3];
    const error = closed?.kind === 'closed' ? closed.error : undefined;
    expect(error).toBeInstanceOf(ConnectionClosed);
    expect(error).toMatchObject({ code: 'connection_closed', reason: 'reconnects_exhausted' });
    await expect(a.closed).resolves.toBe(error);
    await waitFor(() => heardA.length === 4, 'the listener told closed');
    expect(heardA).toEqual(readA.seen);
    expect(heardB).toEqual([]);
    await server.start();
  }, 30_000);
});

describe('onConnection across a credentials rotation and a revocation (an authenticated nats-server of its own, reloaded)', () => {
  const prefix = `ce${randomBytes(4).toString('hex')}`;
  let dir: string;
  let server: PrivateNatsServer | undefined;
  let agent: BatonAgent | undefined;

  // Made here, not when the file loads: a run that filters this block out leaves no dir.
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'baton-sdk-connection-events-'));
  });

  afterAll(async () => {
    await agent?.close({ timeoutMs: 0 }).catch(() => undefined);
    await server?.remove();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('rotated: server_error (credentials_ended, the server’s words), then reconnected with the new file; revoked with nothing new: closed with credentials_revoked', async () => {
    const deployment = openDeployment(join(dir, 'nats-auth'), prefix);
    ensureServiceCreds(deployment);
    const port = await freePort();
    const conf = writeServerConfig(deployment, { listen: `127.0.0.1:${port}`, storeDir: join(dir, 'js') });
    server = await startNatsServer({ port, config: conf });
    // The agent's own copy of its credentials, where a rotation writes the new ones.
    const file = join(dir, 'coder.creds');
    const before = issueCreds(deployment, Principals.agent(P, 'coder'));
    copyFileSync(before.file, file);
    const heard: ConnectionEvent[] = [];
    agent = await createBatonClient({
      natsUrl: `nats://127.0.0.1:${port}`,
      natsCreds: file,
      prefix,
      project: P,
      agent: 'coder',
      onConnection: (event) => void heard.push(event),
    });
    const reader = collect(agent.connectionEvents());

    const after = issueCreds(deployment, Principals.agent(P, 'coder'));
    copyFileSync(after.file, file);
    revokeUsers(deployment, [before.userPublicKey]);
    await server.reload();
    await waitFor(() => heard.some((event) => event.kind === 'reconnected'), 'reconnected with the rotated credentials', { timeoutMs: 20_000 });
    const ended = heard.find((event) => event.kind === 'server_error');
    expect(ended).toEqual({
      kind: 'server_error',
      natsCode: expect.any(String),
      said: expect.stringMatching(/revoked/i),
      about: 'credentials_ended',
      at: expect.any(Number),
    });
    expect(kinds(heard)).toEqual(expect.arrayContaining(['server_error', 'disconnected', 'reconnected']));
    expect(kinds(heard).indexOf('server_error')).toBeLessThan(kinds(heard).indexOf('reconnected'));

    const seen = heard.length;
    revokeUsers(deployment, [after.userPublicKey]);
    await server.reload();
    const closed = await agent.closed;
    expect(closed).toBeInstanceOf(ConnectionClosed);
    expect(closed).toMatchObject({ reason: 'credentials_revoked' });
    await reader.ended;
    const last = heard.slice(seen);
    expect(last[0]).toMatchObject({ kind: 'server_error', about: 'credentials_ended', said: expect.stringMatching(/revoked/i) });
    expect(last.at(-1)).toEqual({ kind: 'closed', error: closed, at: expect.any(Number) });
    expect(reader.seen).toEqual(heard);
  }, 60_000);
});
