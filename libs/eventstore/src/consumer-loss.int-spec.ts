import { waitFor } from '@baton/wait';
import type { NatsHandle } from './connection';
import { PoisonError } from './errors';
import { provision } from './provision';
import { runConsumer, type ConsumerLostEvent, type ConsumerRunner } from './runner';
import { batonStreamNames } from './topology';
import { connectTest, deleteTopology, provisionTopology, randomPrefix, sleep } from './int/support';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

describe('a durable lost under a running consumer (real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;
  let inbox: string;
  let runner: ConsumerRunner | null;

  beforeEach(async () => {
    prefix = randomPrefix();
    nats = await connectTest('consumer-loss-int');
    await provisionTopology(nats, prefix);
    inbox = batonStreamNames(prefix).inbox;
    runner = null;
  });

  afterEach(async () => {
    await runner?.stop();
    await deleteTopology(nats, prefix);
    await nats.close();
  });

  const spec = () => ({ stream: inbox, durable: 'lossy', filterSubject: `${prefix}.in.>`, ackWaitMs: 30_000 });
  const publish = (body: string) => nats.js.publish(`${prefix}.in.p.result.a`, encoder.encode(body));
  const dlqCount = async () => (await nats.jsm.streams.info(batonStreamNames(prefix).dlq)).state.messages;

  it('is re-created after its ack floor: the runner stays up, new messages are handled, acked and dead-lettered ones are not delivered again', async () => {
    await provision(nats.jsm, { consumers: [spec()] });
    const handled: string[] = [];
    const lost: ConsumerLostEvent[] = [];
    const errors: unknown[] = [];
    runner = runConsumer({
      js: nats.js,
      stream: inbox,
      durable: 'lossy',
      prefix,
      pullExpiresMs: 1000,
      ackFloorSampleMs: 200,
      handler: async (msg) => {
        const body = decoder.decode(msg.data);
        if (body.startsWith('bad')) throw new PoisonError(`${body} is poison`, 'schema_violation');
        handled.push(body);
      },
      onConsumerLost: (event) => lost.push(event),
      onError: (error) => errors.push(error),
    });

    for (const body of ['one', 'two', 'bad-1', 'three']) await publish(body);
    await waitFor(async () => handled.length === 3 && (await dlqCount()) === 1, 'the first four settled', { timeoutMs: 15_000 });
    const lastSeq = (await nats.jsm.streams.info(inbox)).state.last_seq;
    await waitFor(async () => (await nats.jsm.consumers.info(inbox, 'lossy')).ack_floor.stream_seq === lastSeq, 'the ack floor at the last message', {
      timeoutMs: 15_000,
    });
    await sleep(600); // the runner reads the floor at most 200 ms after its last ack

    await nats.jsm.consumers.delete(inbox, 'lossy');
    for (const body of ['four', 'bad-2', 'five']) await publish(body);

    await waitFor(() => handled.includes('five'), 'the messages published after the delete', { timeoutMs: 15_000 });
    await sleep(1500); // anything redelivered would arrive by now
    expect(handled).toEqual(['one', 'two', 'three', 'four', 'five']);
    expect(await dlqCount()).toBe(2);
    expect(lost).toEqual([expect.objectContaining({ outcome: 'recreated', ackFloor: lastSeq, startSeq: lastSeq + 1 })]);
    expect(errors.length).toBeGreaterThan(0); // the failed pull was reported, not thrown

    const info = await nats.jsm.consumers.info(inbox, 'lossy');
    expect(info.config).toMatchObject({
      deliver_policy: 'by_start_sequence',
      opt_start_seq: lastSeq + 1,
      filter_subject: `${prefix}.in.>`,
      ack_policy: 'explicit',
    });
    expect(info.num_pending + info.num_ack_pending).toBe(0);
    // A restart provisions the same spec against the re-created durable without complaint.
    expect(await provision(nats.jsm, { consumers: [spec()] })).toEqual({ streams: {}, consumers: { [`${inbox}/lossy`]: 'unchanged' } });
  });

  it('a "new" durable that never acknowledged anything is re-created after what it had skipped, not from the start of the stream', async () => {
    for (const body of ['old-1', 'old-2', 'old-3']) await publish(body);
    await provision(nats.jsm, { consumers: [{ ...spec(), deliverFrom: 'new' as const }] });
    const handled: string[] = [];
    const lost: ConsumerLostEvent[] = [];
    runner = runConsumer({
      js: nats.js,
      stream: inbox,
      durable: 'lossy',
      prefix,
      pullExpiresMs: 1000,
      handler: async (msg) => void handled.push(decoder.decode(msg.data)),
      onConsumerLost: (event) => lost.push(event),
      onError: () => undefined,
    });
    await sleep(300);
    await nats.jsm.consumers.delete(inbox, 'lossy');
    await publish('fresh');
    await waitFor(() => handled.length > 0, 'the message published after the delete', { timeoutMs: 15_000 });
    await sleep(1000);
    expect(handled).toEqual(['fresh']);
    expect(lost).toEqual([expect.objectContaining({ outcome: 'recreated', startSeq: 4 })]);
  });

  it('a durable that disappears again is re-created again, and a stop while it is missing ends the runner', async () => {
    await provision(nats.jsm, { consumers: [spec()] });
    const handled: string[] = [];
    const lost: ConsumerLostEvent[] = [];
    runner = runConsumer({
      js: nats.js,
      stream: inbox,
      durable: 'lossy',
      prefix,
      pullExpiresMs: 1000,
      ackFloorSampleMs: 100,
      handler: async (msg) => void handled.push(decoder.decode(msg.data)),
      onConsumerLost: (event) => lost.push(event),
      onError: () => undefined,
    });
    await publish('a');
    await waitFor(() => handled.length === 1, 'a', { timeoutMs: 15_000 });
    await sleep(400);
    await nats.jsm.consumers.delete(inbox, 'lossy');
    await publish('b');
    await waitFor(() => handled.length === 2, 'b', { timeoutMs: 15_000 });
    await sleep(400);
    await nats.jsm.consumers.delete(inbox, 'lossy');
    await publish('c');
    await waitFor(() => handled.length === 3, 'c', { timeoutMs: 15_000 });
    expect(handled).toEqual(['a', 'b', 'c']);
    expect(lost.map((e) => [e.outcome, e.startSeq])).toEqual([
      ['recreated', 2],
      ['recreated', 3],
    ]);
    await nats.jsm.consumers.delete(inbox, 'lossy');
    await runner.stop();
    runner = null;
  });
});
