import type { NatsHandle } from './connection';
import { followStream } from './follow';
import { connectTest, deleteTopology, provisionTopology, randomPrefix } from './int/support';
import { batonStreamNames } from './topology';

/*
 * nats.js 2.29 never ends a connection's `status()` iterators when the connection closes. A
 * follower hears of reconnections from the connection's one event hub (`onConnectionEvent`), which
 * stops telling at the close: a follower whose connection closed before it was stopped leaves no
 * status loop waiting for ever.
 */

/** The status iterators of the connection not ended yet (nats.js 2.29 keeps each in `listeners` until it ends). */
function openStatusIterators(handle: Pick<NatsHandle, 'connection'>): number {
  const listeners = (handle.connection as unknown as { listeners?: unknown[] }).listeners;
  if (!Array.isArray(listeners)) throw new Error('this nats.js keeps no `listeners` array of status iterators: update the test');
  return listeners.length;
}

describe('a follower whose connection closes (real NATS)', () => {
  let admin: NatsHandle;
  let prefix: string;

  beforeAll(async () => {
    prefix = randomPrefix();
    admin = await connectTest('follow-close-admin');
    await provisionTopology(admin, prefix);
  });

  afterAll(async () => {
    await deleteTopology(admin, prefix);
    await admin.close();
  });

  it('leaves no status loop open once the connection is closed, stopped or not', async () => {
    const nats = await connectTest('follow-close');
    const stream = batonStreamNames(prefix).events;
    await nats.js.publish(`${prefix}.ev.p.run.r1`, new TextEncoder().encode('{}'));
    const seen: number[] = [];
    const follower = await followStream({ js: nats.js, stream, filterSubject: `${prefix}.ev.>`, onMessage: (m) => void seen.push(m.seq) });
    await follower.caughtUp;
    expect(seen).toHaveLength(1);
    const whileOpen = openStatusIterators(nats);
    expect(whileOpen).toBeGreaterThan(0);

    // The connection goes (not the follower): nothing may keep waiting on it.
    await nats.connection.close();
    for (let i = 0; i < 40 && openStatusIterators(nats) > 0; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(openStatusIterators(nats)).toBe(0);
    await follower.stop();
  });
});
