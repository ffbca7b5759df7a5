import { connectNats, type NatsHandle } from './connection';
import { EventStoreError, EventStoreErrorCode } from './errors';
import { connectTest, deleteTopology, NATS_URL, provisionTopology, randomPrefix } from './int/support';
import { streamReader, type RangeResumed } from './stream-reader';
import { batonStreamNames } from './topology';

/*
 * A range read goes on where it was when its consumer is lost under it (its node left the cluster,
 * or it was deleted) or when messages it was delivered never reach it (they travelled on a
 * connection that moved to another node): a new consumer from the message after the last one
 * yielded, nothing missed, nothing twice. A read whose connection closes for good fails typed,
 * at once. (The same read across the kill of a cluster node, through `baton verify`, is
 * apps/cli/src/cluster-failover.int-spec.ts.)
 */
describe('a range read that loses its consumer or its messages (real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;
  let stream: string;
  const encoder = new TextEncoder();

  beforeEach(async () => {
    prefix = randomPrefix();
    nats = await connectTest('stream-reader-resume');
    await provisionTopology(nats, prefix);
    stream = batonStreamNames(prefix).events;
    for (let i = 1; i <= 1200; i++) await nats.js.publish(`${prefix}.ev.p.handoff.${i % 3}`, encoder.encode(String(i)));
  });

  afterEach(async () => {
    await deleteTopology(nats, prefix);
    await nats.close();
  });

  const readers = async () => {
    const names: string[] = [];
    for await (const consumer of nats.jsm.consumers.list(stream)) names.push(consumer.name);
    return names;
  };

  it('its consumer deleted half-way (noticed when its pulls go unanswered): it goes on from the next message through a new one, every message once and in order', async () => {
    const resumed: RangeResumed[] = [];
    const reader = streamReader(nats, stream, { onResume: (r) => resumed.push(r) });
    const seqs: number[] = [];
    for await (const msg of reader.range({ fromSeq: 1, batch: 100 })) {
      seqs.push(msg.seq);
      if (msg.seq === 300) {
        const [name, ...more] = await readers();
        expect(more).toEqual([]);
        await nats.jsm.consumers.delete(stream, name!);
      }
    }
    expect(seqs).toEqual(Array.from({ length: 1200 }, (_, i) => i + 1));
    expect(resumed).toHaveLength(1);
    // nats-server 2.9 leaves a pull to a deleted consumer unanswered: noticed when its pulls go unanswered.
    expect(resumed[0]).toMatchObject({ stream, filterSubject: null, why: expect.stringMatching(/^(its consumer is gone|no answer to its pulls)/) });
    // It went on after what it had yielded when it noticed (the pulls asked ahead were still coming).
    expect(resumed[0]!.afterSeq).toBeGreaterThanOrEqual(300);
    expect(await readers()).toEqual([]);
  });

  it('messages delivered that never reach it (another pull took them): noticed by the gap in the delivery sequence, read again through a new consumer', async () => {
    const resumed: RangeResumed[] = [];
    const reader = streamReader(nats, stream, { onResume: (r) => resumed.push(r) });
    const other = await connectNats({ servers: NATS_URL, name: 'stream-reader-thief', reconnect: false });
    try {
      const inbox = `_INBOX.thief.${prefix}`;
      const stolen: number[] = [];
      const sub = other.connection.subscribe(inbox, { callback: (_error, msg) => void (msg.reply && stolen.push(msg.data.length)) });
      const seqs: number[] = [];
      const filter = `${prefix}.ev.p.handoff.1`;
      for await (const msg of reader.range({ fromSeq: 1, batch: 50, filterSubject: filter })) {
        seqs.push(msg.seq);
        if (seqs.length === 100) {
          // As a connection that moved to another node loses what was on its way: 20 messages of
          // the reader's consumer delivered elsewhere.
          const [name] = await readers();
          other.connection.publish(`$JS.API.CONSUMER.MSG.NEXT.${stream}.${name}`, JSON.stringify({ batch: 20, expires: 2_000_000_000 }), { reply: inbox });
          await other.connection.flush();
        }
      }
      sub.unsubscribe();
      expect(stolen.length).toBeGreaterThan(0);
      expect(seqs).toEqual(Array.from({ length: 400 }, (_, i) => 3 * i + 1));
      expect(resumed).toHaveLength(1);
      expect(resumed[0]).toMatchObject({ filterSubject: filter, why: expect.stringMatching(/^messages \d+\.\.\d+ of its consumer were lost on their way$/) });
    } finally {
      await other.close();
    }
  });

  it('its connection closed for good: it fails typed (connection_closed) instead of waiting', async () => {
    const own = await connectNats({ servers: NATS_URL, name: 'stream-reader-closing', reconnect: false });
    const reader = streamReader(own, stream);
    const seqs: number[] = [];
    const failure = await (async () => {
      for await (const msg of reader.range({ fromSeq: 1, batch: 100 })) {
        seqs.push(msg.seq);
        if (msg.seq === 250) await own.close();
      }
    })().then(
      () => null,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(EventStoreError);
    expect((failure as EventStoreError).code).toBe(EventStoreErrorCode.connectionClosed);
    expect((failure as Error).message).toMatch(new RegExp(`^reading ${stream}: the NATS connection closed after seq \\d+$`));
    expect(seqs.length).toBeLessThan(1200);
  });
});
