import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { batonStreamNames, connectNats, type NatsHandle } from '@baton/eventstore';
import { runService } from '../service/bootstrap';
import { JetStreamServer } from './jetstream.server';

/*
 * nats.js 2.29 never ends a connection's `status()` iterators when the connection closes: a loop
 * over one of them waits for ever once the connection is gone. A service reads its connection's
 * statuses through the one event hub of libs/eventstore (`connectionEvents`), which ends with the
 * connection's `closed` event; so once the connection closed no status iterator is left open.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The status iterators of a connection that have not ended: nats.js 2.29 keeps each one `status()`
 * gave in the connection's `listeners` until its loop ends (or it is stopped). Throws when the
 * client keeps them elsewhere (another nats.js): the test must not pass for want of looking.
 */
function openStatusIterators(handle: Pick<NatsHandle, 'connection'>): number {
  const listeners = (handle.connection as unknown as { listeners?: unknown[] }).listeners;
  if (!Array.isArray(listeners)) throw new Error('this nats.js keeps no `listeners` array of status iterators: update the test');
  return listeners.length;
}

/** Until no status iterator of the connection is open, or 2 s: how many are left. */
async function settledIterators(handle: Pick<NatsHandle, 'connection'>): Promise<number> {
  for (let i = 0; i < 40 && openStatusIterators(handle) > 0; i++) await sleep(50);
  return openStatusIterators(handle);
}

describe("a service's NATS status loop ends when its connection closes", () => {
  const prefix = `sl${randomBytes(5).toString('hex')}`;
  let admin: NatsHandle;

  beforeAll(async () => {
    admin = await connectNats({ servers: NATS_URL, reconnect: false });
  });

  afterAll(async () => {
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await admin.jsm.streams.delete(name).catch(() => undefined);
    await admin.drain();
  });

  it('a service (runService) stopped: its connection closed, none of its status loops is left waiting', async () => {
    const service = await runService({
      service: 'probe',
      defaultPort: 0,
      imports: [],
      redis: false,
      env: { NATS_URL, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: 'error' },
    });
    const handle = service.runtime.nats;
    // Read while it runs: the connection's event hub (and, before the fix, the transport's own loop).
    expect(openStatusIterators(handle)).toBeGreaterThan(0);
    await service.stop();
    expect(handle.connection.isClosed()).toBe(true);
    expect(await settledIterators(handle)).toBe(0);
  });

  it('the JetStream transport on a connection of its own: closed, its status loop ends', async () => {
    const server = new JetStreamServer({ name: `status-loop-${prefix}`, prefix, connect: { servers: NATS_URL }, consumers: [], provision: false });
    await new Promise<void>((resolve, reject) => void server.listen((error?: unknown) => (error ? reject(error) : resolve())));
    const handle = (server as unknown as { handle: NatsHandle }).handle;
    expect(openStatusIterators(handle)).toBeGreaterThan(0);
    // Closed under it (not by `close()`, which would drain it on purpose): a connection lost for good.
    await handle.connection.close();
    expect(await settledIterators(handle)).toBe(0);
    await server.close();
  });
});
