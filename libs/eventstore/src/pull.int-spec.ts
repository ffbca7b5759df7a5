import { AckPolicy, createInbox, DeliverPolicy, type Msg } from 'nats';
import { headersFrom, type NatsHandle } from './connection';
import { headersToRecord } from './dead-letter';
import { connectTest, deleteTopology, provisionTopology, randomPrefix } from './int/support';
import { ackInfo, headerRecord, openPull, pullStatus, pullTarget, PullStream } from './pull';
import { batonStreamNames } from './topology';

/*
 * nats-server hands a consumer's messages round-robin to the pulls waiting on it (2.9.10: with
 * three pulls open at once, the first got 1, 4, 7…), so a reader with more than one pull open
 * must not read them pull by pull. PullStream reads every pull's messages as they arrive.
 */
describe('PullStream (real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;
  let stream: string;

  beforeEach(async () => {
    prefix = randomPrefix();
    nats = await connectTest('pull');
    await provisionTopology(nats, prefix);
    stream = batonStreamNames(prefix).events;
  });

  afterEach(async () => {
    await deleteTopology(nats, prefix);
    await nats.close();
  });

  it('three pulls open at once on one consumer: every message once, in stream order; the credit falls to nothing', async () => {
    const writes: Promise<unknown>[] = [];
    for (let i = 1; i <= 3000; i++) writes.push(nats.js.publish(`${prefix}.ev.p.handoff.h${i % 7}`, new TextEncoder().encode(String(i))));
    await Promise.all(writes);
    await nats.jsm.consumers.add(stream, { name: 'pulls', ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.All, mem_storage: true });
    const pulls = new PullStream(pullTarget(nats.js), stream, 'pulls', { maxBytes: 8 * 1024 * 1024, expiresMs: 5000 });
    try {
      pulls.ask(1000);
      pulls.ask(1000);
      pulls.ask(1000);
      expect(pulls.credit()).toBe(3000);
      const seqs: number[] = [];
      for (let i = 0; i < 3000; i++) {
        const msg = await pulls.next(10_000);
        if (msg === null) throw new Error(`no message after ${seqs.length}`);
        seqs.push(ackInfo(msg.reply as string)?.streamSeq ?? -1);
      }
      expect(seqs).toEqual(Array.from({ length: 3000 }, (_, i) => i + 1));
      expect(pulls.credit()).toBe(0);
    } finally {
      pulls.stop();
    }
  });

  it('a pull the server ends at its byte bound gives back the credit it will not bring', async () => {
    const big = new Uint8Array(400 * 1024).fill(1);
    for (let i = 1; i <= 6; i++) await nats.js.publish(`${prefix}.ev.p.handoff.big`, big);
    await nats.jsm.consumers.add(stream, { name: 'bytes', ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.All, mem_storage: true });
    const pulls = new PullStream(pullTarget(nats.js), stream, 'bytes', { maxBytes: 1024 * 1024, expiresMs: 5000 });
    try {
      // Six asked for, two fit in 1 MiB: the server ends the pull, saying four are left.
      pulls.ask(6);
      expect(await pulls.next(10_000)).not.toBeNull();
      expect(await pulls.next(10_000)).not.toBeNull();
      for (let i = 0; i < 100 && pulls.credit() > 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(pulls.credit()).toBe(0);
      // Nothing more comes unless asked for.
      expect(await pulls.next(300)).toBeNull();
      pulls.ask(2);
      expect(ackInfo(((await pulls.next(10_000)) ?? { reply: '' }).reply as string)?.streamSeq).toBe(3);
    } finally {
      pulls.stop();
    }
  });

  it("a pull sent to a consumer that is not there gets no answer at all: it ends silent (the runner then asks the consumer's info)", async () => {
    await nats.jsm.consumers.add(stream, { name: 'gone', ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.All, mem_storage: true });
    await nats.jsm.consumers.delete(stream, 'gone');
    const pull = openPull(pullTarget(nats.js), stream, 'gone', { batch: 10, maxBytes: 1024 * 1024, expiresMs: 1000 });
    const got: unknown[] = [];
    for await (const msg of pull) got.push(msg);
    expect(got).toEqual([]);
    expect(pull.endedBy()).toBeNull();
    expect(pull.silent()).toBe(true);
  });

  it('a pull the server answers ends with its status, not silent', async () => {
    await nats.jsm.consumers.add(stream, { name: 'idle', ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.All, mem_storage: true });
    const pull = openPull(pullTarget(nats.js), stream, 'idle', { batch: 10, maxBytes: 1024 * 1024, expiresMs: 1000 });
    for await (const msg of pull) throw new Error(`nothing was stored, yet ${msg.subject} came`);
    expect(pull.endedBy()).toMatchObject({ code: 408 });
    expect(pull.silent()).toBe(false);
  });

  it("headerRecord reads a delivered message's headers from its raw block as the client decodes them: repeated names, none at all", async () => {
    const hdrs = headersFrom({ 'Baton-Event-Type': 'handoff.created', traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' });
    hdrs.append('Baton-Note', 'one');
    hdrs.append('Baton-Note', 'two: with a colon ');
    await nats.js.publish(`${prefix}.ev.p.handoff.h1`, new TextEncoder().encode('with'), { headers: hdrs });
    await nats.jsm.consumers.add(stream, { name: 'headers', ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.All, mem_storage: true });
    const pull = openPull(pullTarget(nats.js), stream, 'headers', { batch: 1, maxBytes: 1024 * 1024, expiresMs: 2000 });
    let msg: Msg | null = null;
    for await (const delivered of pull) {
      msg = delivered;
      break;
    }
    expect(msg).not.toBeNull();
    expect(headerRecord(msg!)).toEqual(headersToRecord(msg!.headers));
    expect(headerRecord(msg!)).toEqual({
      'Baton-Event-Type': ['handoff.created'],
      traceparent: ['00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'],
      'Baton-Note': ['one', 'two: with a colon'],
    });
    // A core message without headers.
    const sub = nats.connection.subscribe(`${prefix}.plain`, { max: 1 });
    nats.connection.publish(`${prefix}.plain`, new TextEncoder().encode('x'));
    for await (const plain of sub) expect(headerRecord(plain)).toEqual({});
  });
  it('pullStatus reads a server status from the raw header line as the client does, and null for stored messages with and without headers', async () => {
    await nats.js.publish(`${prefix}.ev.p.handoff.h1`, new TextEncoder().encode('bare'));
    await nats.js.publish(`${prefix}.ev.p.handoff.h1`, new TextEncoder().encode('with'), { headers: headersFrom({ 'Baton-Event-Type': 'handoff.created' }) });
    await nats.jsm.consumers.add(stream, { name: 'status', ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.All, mem_storage: true });
    const inbox = createInbox();
    const sub = nats.connection.subscribe(inbox);
    const messages = sub[Symbol.asyncIterator]();
    const receive = async (count: number): Promise<Msg[]> => {
      const got: Msg[] = [];
      while (got.length < count) got.push((await messages.next()).value as Msg);
      return got;
    };
    const next = (body: object) =>
      nats.connection.publish(`$JS.API.CONSUMER.MSG.NEXT.${stream}.status`, new TextEncoder().encode(JSON.stringify(body)), { reply: inbox });
    try {
      next({ batch: 2 });
      const stored = await receive(2);
      expect(stored.map((msg) => pullStatus(msg))).toEqual([null, null]);
      expect(new TextDecoder().decode(stored[1]!.data)).toBe('with');
      // Nothing left: a pull that expires ends with 408 Request Timeout.
      next({ batch: 1, expires: 200_000_000 });
      const [expired] = await receive(1);
      expect(pullStatus(expired!)).toBe(408);
      expect(expired!.headers?.code).toBe(408);
      // Nothing left and no wait: 404 No Messages at once.
      next({ batch: 1, no_wait: true });
      const [none] = await receive(1);
      expect(pullStatus(none!)).toBe(404);
      expect(none!.headers?.code).toBe(404);
    } finally {
      sub.unsubscribe();
    }
  });
});
