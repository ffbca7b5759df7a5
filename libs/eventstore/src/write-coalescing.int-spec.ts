import type { Msg, NatsConnection } from 'nats';
import { connectNats, type NatsHandle } from './connection';
import { NATS_URL, randomPrefix } from './int/support';
import { coalesceWrites } from './write-coalescing';

/** Count the socket writes (`_write` / `_writev`: one system call each) a connection makes. */
function countWrites(connection: NatsConnection): { count: () => number } {
  const socket = (connection as unknown as { protocol: { transport: { socket: Record<string, (...args: unknown[]) => unknown> } } }).protocol.transport.socket;
  let writes = 0;
  for (const method of ['_write', '_writev'] as const) {
    const original = socket[method]!.bind(socket);
    socket[method] = (...args: unknown[]) => {
      writes += 1;
      return original(...args);
    };
  }
  return { count: () => writes };
}

/** Publish `n` messages, each from its own microtask, as handlers of a pulled batch do. */
async function publishAcrossMicrotasks(connection: NatsConnection, subject: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    connection.publish(subject, new TextEncoder().encode(String(i)));
    await Promise.resolve();
  }
}

async function collect(receiver: NatsHandle, subject: string, n: number): Promise<{ done: Promise<string[]> }> {
  const seen: string[] = [];
  const sub = receiver.connection.subscribe(subject, { max: n });
  await receiver.connection.flush();
  const done = (async () => {
    for await (const m of sub as AsyncIterable<Msg>) seen.push(new TextDecoder().decode(m.data));
    return seen;
  })();
  return { done };
}

describe('coalesced socket writes (real NATS)', () => {
  let receiver: NatsHandle;
  const handles: NatsHandle[] = [];

  beforeAll(async () => {
    receiver = await connectNats({ servers: NATS_URL, name: 'coalesce-receiver', reconnect: false, checkJetStream: false });
  });

  afterAll(async () => {
    for (const h of handles) await h.close();
    await receiver.close();
  });

  const open = async (coalesce: boolean) => {
    const h = await connectNats({ servers: NATS_URL, name: 'coalesce-sender', reconnect: false, checkJetStream: false, coalesceWrites: coalesce });
    handles.push(h);
    return h;
  };

  it('what one event-loop turn writes leaves in one socket write, in order and complete; without it every microtask writes on its own', async () => {
    const n = 200;
    const results: Record<'on' | 'off', { writes: number; seen: string[] }> = { on: { writes: 0, seen: [] }, off: { writes: 0, seen: [] } };
    for (const mode of ['off', 'on'] as const) {
      const sender = await open(mode === 'on');
      const subject = `${randomPrefix()}.coalesce.${mode}`;
      const { done } = await collect(receiver, subject, n);
      const writes = countWrites(sender.connection);
      await publishAcrossMicrotasks(sender.connection, subject, n);
      await sender.connection.flush();
      results[mode] = { writes: writes.count(), seen: await done };
    }
    const expected = Array.from({ length: n }, (_, i) => String(i));
    expect(results.off.seen).toEqual(expected);
    expect(results.on.seen).toEqual(expected);
    // Without coalescing, the client's microtask flush writes once per publish.
    expect(results.off.writes).toBeGreaterThanOrEqual(n);
    // With it: the turn's publishes in one write, the flush's PING in at most one more.
    expect(results.on.writes).toBeLessThanOrEqual(2);
  });

  it('a close right after publishing still sends what was published (the close uncorks first)', async () => {
    const sender = await open(true);
    const subject = `${randomPrefix()}.coalesce.close`;
    const { done } = await collect(receiver, subject, 50);
    await publishAcrossMicrotasks(sender.connection, subject, 50);
    await sender.close();
    expect(await done).toHaveLength(50);
  });

  it('is applied once per connection, and says so', async () => {
    const sender = await open(true);
    expect(coalesceWrites(sender.connection)).toEqual({ on: true });
    const writes = countWrites(sender.connection);
    const subject = `${randomPrefix()}.coalesce.twice`;
    const { done } = await collect(receiver, subject, 20);
    await publishAcrossMicrotasks(sender.connection, subject, 20);
    await sender.connection.flush();
    expect(await done).toHaveLength(20);
    expect(writes.count()).toBeLessThanOrEqual(2);
  });

  it('leaves a client of another shape alone and says why', () => {
    expect(coalesceWrites({} as NatsConnection)).toEqual({ on: false, reason: 'the NATS client has no protocol handler of the expected shape' });
  });
});
