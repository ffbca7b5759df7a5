import { AckPolicy, createInbox, DeliverPolicy, headers, type Msg } from 'nats';
import { headersFrom, type NatsHandle } from './connection';
import { headersToRecord } from './dead-letter';
import { connectTest, deleteTopology, provisionTopology, randomPrefix, steadyPublisher, useTopology } from './int/support';
import { ackInfo, DeliveredMessage, headerReader, headerRecord, PULL_EXPIRY_GRACE_MS, PullSession, pullStatus, pullTarget, PullStream } from './pull';
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
  let sessions: PullSession[];

  beforeEach(async () => {
    prefix = randomPrefix();
    nats = await connectTest('pull');
    await provisionTopology(nats, prefix);
    stream = batonStreamNames(prefix).events;
    sessions = [];
  });

  afterEach(async () => {
    for (const session of sessions) session.stop();
    await deleteTopology(nats, prefix);
    await nats.close();
  });

  /** One pull of `consumer` over a session of its own (stopped after the test). */
  const onePull = (consumer: string, ask: { batch: number; maxBytes: number; expiresMs: number }) => {
    const session = new PullSession(pullTarget(nats.js), stream, consumer);
    sessions.push(session);
    return session.pull(ask);
  };

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
    const pull = onePull('gone', { batch: 10, maxBytes: 1024 * 1024, expiresMs: 1000 });
    const got: unknown[] = [];
    for await (const msg of pull) got.push(msg);
    expect(got).toEqual([]);
    expect(pull.endedBy()).toBeNull();
    expect(pull.silent()).toBe(true);
  });

  it('a pull the server answers ends with its status, not silent', async () => {
    await nats.jsm.consumers.add(stream, { name: 'idle', ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.All, mem_storage: true });
    const pull = onePull('idle', { batch: 10, maxBytes: 1024 * 1024, expiresMs: 1000 });
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
    const pull = onePull('headers', { batch: 1, maxBytes: 1024 * 1024, expiresMs: 2000 });
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
    // The reader that decodes the block once answers with each header's first value, read after read.
    const read = headerReader(msg!);
    for (const name of ['Baton-Event-Type', 'traceparent', 'Baton-Note', 'Baton-Absent', 'Baton-Note']) expect(read(name)).toBe(headerRecord(msg!)[name]?.[0]);
    expect(read('Baton-Note')).toBe('one');
    expect(read('Baton-Absent')).toBeUndefined();
    // A core message without headers.
    const sub = nats.connection.subscribe(`${prefix}.plain`, { max: 1 });
    nats.connection.publish(`${prefix}.plain`, new TextEncoder().encode('x'));
    for await (const plain of sub) {
      expect(headerRecord(plain)).toEqual({});
      expect(headerReader(plain)('Baton-Note')).toBeUndefined();
    }
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

/*
 * nats-server 2.9 (2.9.10, measured) can expire a pull without a word: when a message becomes
 * ready for a pull at the moment it expires, the server drops the pull and sends no 408. A reader
 * that waited for the 408 (or a second of silence after the last message) stalled its consumer
 * for seconds under a steady flow — the notifier's projections stopped for ~2 s in the bench's
 * latency phase. A PullSession gives a pull up a moment after its expiry and reads on.
 */
describe('PullSession (real NATS)', () => {
  const topology = useTopology('pull-session');

  it('under a steady flow of messages, pull after pull: none waits longer than its expiry and the grace; every message once, in order', async () => {
    const nats = topology.nats();
    const prefix = topology.prefix();
    const stream = batonStreamNames(prefix).events;
    await nats.jsm.consumers.add(stream, { durable_name: 'steady', ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.All });
    const session = new PullSession(pullTarget(nats.js), stream, 'steady');
    // One publish after another, each awaited: the server's consumer is never idle at a pull's expiry.
    const publisher = steadyPublisher((n) => nats.js.publish(`${prefix}.ev.p.handoff.h${n % 5}`, new Uint8Array(200)));
    let publisherDone = false;
    const expiresMs = 500;
    const seqs: number[] = [];
    const pulls: Array<{ ms: number; got: number; status: number | null; silent: boolean }> = [];
    try {
      const started = Date.now();
      // Read while publishing for 3 s, then until everything published has come.
      setTimeout(() => void publisher.stop().then(() => (publisherDone = true)), 3000);
      while (!publisherDone || seqs.length < publisher.count()) {
        if (Date.now() - started > 12_000)
          throw new Error(
            `read ${seqs.length} of ${publisher.count()}: ${JSON.stringify(pulls)} missing ${Array.from({ length: publisher.count() }, (_, i) => i + 1)
              .filter((n) => !seqs.includes(n))
              .slice(0, 20)} last ${seqs.slice(-5)}`,
          );
        const asked = Date.now();
        const pull = session.pull({ batch: 1_000_000, maxBytes: 8 * 1024 * 1024, expiresMs });
        let got = 0;
        for await (const msg of pull) {
          seqs.push(ackInfo(msg.reply as string)?.streamSeq ?? -1);
          got++;
        }
        pulls.push({ ms: Date.now() - asked, got, status: pull.endedBy()?.code ?? null, silent: pull.silent() });
      }
    } finally {
      await publisher.stop();
      session.stop();
    }
    expect(seqs).toEqual(Array.from({ length: publisher.count() }, (_, i) => i + 1));
    // Before sessions, a pull the server had expired unannounced was waited on for a second past
    // its last message; now each pull ends by its status or the grace after its expiry.
    for (const pull of pulls) expect(pull.ms).toBeLessThan(expiresMs + PULL_EXPIRY_GRACE_MS + 400);
    expect(pulls.length).toBeGreaterThanOrEqual(5);
    for (const pull of pulls) if (!pull.silent) expect(pull.status).toBe(408);
  });

  /*
   * The server's side is played here over core NATS (the pull requests go to an API prefix this
   * test answers), to say exactly when messages and statuses come.
   */
  it('a pull given up at its expiry: its late messages are read with the next pull, its late status is ignored', async () => {
    const nats = topology.nats();
    const prefix = topology.prefix();
    const apiPrefix = `${prefix}.api`;
    const requests: string[] = [];
    const sub = nats.connection.subscribe(`${apiPrefix}.CONSUMER.MSG.NEXT.S.c`, { callback: (_e, msg) => requests.push(msg.reply as string) });
    await nats.connection.flush();
    const session = new PullSession({ nc: nats.connection, apiPrefix }, 'S', 'c');
    // (The server does not pass on a client's message whose reply subject is a `$JS.ACK` one: these
    // stand-ins carry their sequence as their one byte.)
    const deliver = (reply: string, seq: number) => nats.connection.publish(reply, new Uint8Array([seq]), { reply: `${prefix}.ack.${seq}` });
    const status = (reply: string, code: number, description: string) =>
      nats.connection.publish(reply, new Uint8Array(0), { headers: headers(code, description) });
    const read = async (pull: AsyncIterable<Msg>) => {
      const seqs: number[] = [];
      for await (const msg of pull) seqs.push(msg.data[0] ?? -1);
      return seqs;
    };
    try {
      // Pull 1 brings two messages and is never ended by the server.
      const first = session.pull({ batch: 10, maxBytes: 1024 * 1024, expiresMs: 300 });
      const firstRead = read(first);
      await waitFor(() => requests.length === 1);
      deliver(requests[0]!, 1);
      deliver(requests[0]!, 2);
      const asked = Date.now();
      expect(await firstRead).toEqual([1, 2]);
      expect(Date.now() - asked).toBeLessThan(300 + PULL_EXPIRY_GRACE_MS + 300);
      expect(first.silent()).toBe(true);
      expect(first.endedBy()).toBeNull();
      // Pull 2: the server still delivers one message for pull 1, then pull 1's 408 comes, then
      // pull 2's message and its own 408.
      const second = session.pull({ batch: 10, maxBytes: 1024 * 1024, expiresMs: 5000 });
      const secondRead = read(second);
      await waitFor(() => requests.length === 2);
      expect(requests[1]).not.toBe(requests[0]);
      deliver(requests[0]!, 3);
      status(requests[0]!, 408, 'Request Timeout');
      deliver(requests[1]!, 4);
      await nats.connection.flush();
      await new Promise((resolve) => setTimeout(resolve, 100));
      status(requests[1]!, 408, 'Request Timeout');
      expect(await secondRead).toEqual([3, 4]);
      expect(second.endedBy()).toMatchObject({ code: 408 });
      expect(second.silent()).toBe(false);
      // A pull's own count ends it without a status.
      const third = session.pull({ batch: 1, maxBytes: 1024 * 1024, expiresMs: 5000 });
      const thirdRead = read(third);
      await waitFor(() => requests.length === 3);
      deliver(requests[2]!, 5);
      expect(await thirdRead).toEqual([5]);
      expect(third.silent()).toBe(false);
      expect(third.endedBy()).toBeNull();
      // One pull is read at a time.
      const fourth = session.pull({ batch: 1, maxBytes: 1024 * 1024, expiresMs: 5000 });
      const iterator = fourth[Symbol.asyncIterator]();
      const pending = iterator.next();
      expect(() => session.pull({ batch: 1, maxBytes: 1024 * 1024, expiresMs: 5000 })).toThrow(/still being read/);
      session.stop();
      expect((await pending).done).toBe(true);
    } finally {
      session.stop();
      sub.unsubscribe();
    }
  });
});

async function waitFor(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('DeliveredMessage on a connection closed under it (real NATS)', () => {
  it('an ack, nak, term or working beat sends nothing and does not throw: the server delivers it again after its ack wait', async () => {
    const handle = await connectTest('pull-closed-int');
    const reply = createInbox();
    const info = ackInfo(`$JS.ACK.S.C.1.7.7.${Date.now()}000000.0`);
    const messages = ['ack', 'nak', 'term', 'working'].map(() => new DeliveredMessage(handle.connection, { reply } as Msg, info!));
    await handle.close();
    expect(handle.connection.isClosed()).toBe(true);
    // On the old code each threw the client's CONNECTION_CLOSED — from a runner's beat timer, an uncaught exception.
    expect(() => messages[0]!.ack()).not.toThrow();
    expect(() => messages[1]!.nak(100)).not.toThrow();
    expect(() => messages[2]!.term()).not.toThrow();
    expect(() => messages[3]!.working()).not.toThrow();
  });
});
