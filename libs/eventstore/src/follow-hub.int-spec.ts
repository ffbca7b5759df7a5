import { waitFor } from '@baton/wait';
import type { NatsHandle } from './connection';
import { followHub } from './follow-hub';
import { connectTest, deleteTopology, provisionTopology, randomPrefix } from './int/support';
import type { FollowedMessage } from './stream-reader';
import { batonStreamNames } from './topology';

describe('follow hub: several in-process followers on one consumer (real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;
  let stream: string;

  beforeEach(async () => {
    prefix = randomPrefix();
    nats = await connectTest('follow-hub');
    await provisionTopology(nats, prefix);
    stream = batonStreamNames(prefix).events;
  });

  afterEach(async () => {
    await deleteTopology(nats, prefix);
    await nats.close();
  });

  const publish = async (subject: string) => (await nats.js.publish(subject, new TextEncoder().encode(subject))).seq;
  const consumers = async () => (await nats.jsm.consumers.list(stream).next()).length;

  it('each follower gets, in order, exactly the messages of its filter from its start; one consumer serves them all; each is caught up once the history is handed over', async () => {
    const before: Array<[string, number]> = [];
    for (const subject of [`${prefix}.ev.p.run.r1`, `${prefix}.ev.p.handoff.h1`, `${prefix}.ev.p.run.r1`, `${prefix}.ev.p.handoff.h2`]) {
      before.push([subject, await publish(subject)]);
    }
    const hub = followHub({ js: nats.js, stream, filterSubject: `${prefix}.ev.>` });
    const got = { all: [] as number[], handoffs: [] as number[], fromThird: [] as number[] };
    const take = (into: number[]) => (m: FollowedMessage) => void into.push(m.seq);
    const all = await hub.follow({ filterSubject: `${prefix}.ev.>`, onMessage: take(got.all) });
    const handoffs = await hub.follow({ filterSubject: `${prefix}.ev.*.handoff.*`, onMessage: take(got.handoffs) });
    const fromThird = await hub.follow({ filterSubject: `${prefix}.ev.>`, startSeq: before[2]![1], onMessage: take(got.fromThird) });
    expect(all.isCaughtUp()).toBe(false);
    await hub.start();
    await Promise.all([all.caughtUp, handoffs.caughtUp, fromThird.caughtUp]);
    expect([all.isCaughtUp(), handoffs.isCaughtUp(), fromThird.isCaughtUp()]).toEqual([true, true, true]);
    expect(await consumers()).toBe(1);
    // Its filter is the stream's only subject: the consumer is made without one (nats-server 2.9
    // makes a filtered consumer by matching the filter against every subject of the stream).
    const [shared] = await nats.jsm.consumers.list(stream).next();
    expect(shared?.config.filter_subject ?? '').toBe('');

    const live = await publish(`${prefix}.ev.p.handoff.h3`);
    await waitFor(() => got.handoffs.includes(live), 'the live handoff event');
    const seqs = before.map(([, seq]) => seq);
    expect(got.all).toEqual([...seqs, live]);
    expect(got.handoffs).toEqual([seqs[1], seqs[3], live]);
    expect(got.fromThird).toEqual([seqs[2], seqs[3], live]);
    expect([all.lastSeq(), handoffs.lastSeq(), fromThird.lastSeq()]).toEqual([live, live, live]);

    // Stopping one follower leaves the others served; the last one out removes the consumer.
    await handoffs.stop();
    const after = await publish(`${prefix}.ev.p.handoff.h4`);
    await waitFor(() => got.all.includes(after), 'the event after one follower stopped');
    expect(got.handoffs).not.toContain(after);
    expect(hub.followers()).toBe(2);
    await all.stop();
    await fromThird.stop();
    await waitFor(async () => (await consumers()) === 0, 'the shared consumer removed');
  });

  it('says how far it has read: behind() counts the stored events not handed over yet (null before it starts), 0 once caught up', async () => {
    let last = 0;
    for (let i = 0; i < 300; i++) last = await publish(`${prefix}.ev.p.run.r${i}`);
    // One message per pull: the follow is still reading when asked.
    const hub = followHub({ js: nats.js, stream, filterSubject: `${prefix}.ev.>`, batch: 1 });
    const follower = await hub.follow({ filterSubject: `${prefix}.ev.*.handoff.*`, onMessage: () => undefined });
    expect(await hub.behind()).toBeNull();
    await hub.start();
    const early = await hub.behind();
    expect(early).toBeGreaterThan(0);
    expect(hub.lastSeq() + early!).toBeGreaterThanOrEqual(last);
    await follower.caughtUp;
    await waitFor(async () => ((await follower.behind()) === 0 ? true : undefined), 'caught up');
    expect(hub.lastSeq()).toBe(last);
    await hub.stop();
  });

  it("a follower's exception goes to its own onError; the others and the hub go on", async () => {
    await publish(`${prefix}.ev.p.run.r1`);
    await publish(`${prefix}.ev.p.run.r2`);
    const hub = followHub({ js: nats.js, stream, filterSubject: `${prefix}.ev.>` });
    const errors: number[] = [];
    const seen: number[] = [];
    await hub.follow({
      filterSubject: `${prefix}.ev.>`,
      onMessage: (m) => {
        if (m.subject.endsWith('r1')) throw new Error('bad');
      },
      onError: (_e, m) => errors.push(m.seq),
    });
    const other = await hub.follow({ filterSubject: `${prefix}.ev.>`, onMessage: (m) => void seen.push(m.seq) });
    await hub.start();
    await other.caughtUp;
    expect(errors).toEqual([1]);
    expect(seen).toEqual([1, 2]);
    await hub.stop();
    await waitFor(async () => (await consumers()) === 0, 'the shared consumer removed');
  });

  it('refuses a follower that joins after the start or asks for subjects outside its filter', async () => {
    const hub = followHub({ js: nats.js, stream, filterSubject: `${prefix}.ev.*.handoff.*` });
    await expect(hub.follow({ filterSubject: `${prefix}.ev.>`, onMessage: () => undefined })).rejects.toThrow(/not within the hub's filter/);
    await expect(hub.follow({ filterSubject: `${prefix}.ev.*.run.*`, onMessage: () => undefined })).rejects.toThrow(/not within the hub's filter/);
    await hub.follow({ filterSubject: `${prefix}.ev.p.handoff.*`, onMessage: () => undefined });
    await hub.start();
    await expect(hub.follow({ filterSubject: `${prefix}.ev.*.handoff.*`, onMessage: () => undefined })).rejects.toThrow(/has started/);
    await hub.stop();
  });
});
