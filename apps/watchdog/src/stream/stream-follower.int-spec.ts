import { randomBytes } from 'node:crypto';
import { batonStreamNames, batonTopology, connectNats, provision, type NatsHandle } from '@baton/eventstore';
import { followStream, type StreamFollower } from './stream-follower';

/*
 * The watchdog's state (lease deadlines, loop guards, handoff deadlines) is folded from ordered
 * consumers. One deleted or lost under a running watchdog must not stop it: the client re-creates
 * it from the last sequence seen, so every message still arrives once, in order.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe('stream follower (real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;
  let follower: StreamFollower | null = null;

  beforeEach(async () => {
    prefix = `tf${randomBytes(5).toString('hex')}`;
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
  });

  afterEach(async () => {
    await follower?.stop();
    for (const name of Object.values(batonStreamNames(prefix))) await nats.jsm.streams.delete(name).catch(() => undefined);
    await nats.close();
  });

  it('its consumer deleted under it: re-created from the last sequence seen, nothing missed or repeated', async () => {
    const stream = batonStreamNames(prefix).events;
    const seen: number[] = [];
    follower = await followStream({ js: nats.js, stream, filterSubject: `${prefix}.ev.>`, onMessage: (m) => void seen.push(m.seq) });
    await nats.js.publish(`${prefix}.ev.p.handoff.a`, new Uint8Array([1]));
    await follower.caughtUp;
    const until = Date.now() + 5000;
    while (seen.length < 1 && Date.now() < until) await sleep(20);

    const names: string[] = [];
    for await (const consumer of nats.jsm.consumers.list(stream)) names.push(consumer.name);
    expect(names).toHaveLength(1);
    await nats.jsm.consumers.delete(stream, names[0]!);
    await nats.js.publish(`${prefix}.ev.p.handoff.b`, new Uint8Array([2]));
    await nats.js.publish(`${prefix}.ev.p.handoff.c`, new Uint8Array([3]));

    const deadline = Date.now() + 20_000;
    while (seen.length < 3 && Date.now() < deadline) await sleep(100);
    await sleep(500);
    expect(seen).toEqual([1, 2, 3]);
    expect(follower.lastSeq()).toBe(3);
  }, 30_000);
});
