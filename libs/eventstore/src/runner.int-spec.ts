import { createHash } from 'node:crypto';
import { headers as natsHeaders } from 'nats';
import { waitFor } from '@baton/wait';
import type { NatsHandle } from './connection';
import { DlqHeader } from './dead-letter';
import { PoisonError, TransientError } from './errors';
import { provision } from './provision';
import { runConsumer, type ConsumedMessage, type ConsumerRunner, type MessageOutcome } from './runner';
import { batonStreamNames } from './topology';
import { connectTest, deleteTopology, provisionTopology, randomPrefix, sleep, steadyPublisher } from './int/support';

describe('runConsumer (real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;
  let inbox: string;
  let runners: ConsumerRunner[];

  beforeEach(async () => {
    prefix = randomPrefix();
    nats = await connectTest('runner-int');
    await provisionTopology(nats, prefix);
    inbox = batonStreamNames(prefix).inbox;
    runners = [];
  });

  afterEach(async () => {
    await Promise.all(runners.map((r) => r.stop()));
    await deleteTopology(nats, prefix);
    await nats.close();
  });

  const durable = async (name: string, ackWaitMs = 30_000) => {
    await provision(nats.jsm, { consumers: [{ stream: inbox, durable: name, filterSubject: `${prefix}.in.>`, ackWaitMs }] });
  };

  const publish = (subject: string, body: string, msgID?: string) =>
    nats.js.publish(`${prefix}.in.${subject}`, new TextEncoder().encode(body), msgID ? { msgID } : undefined);

  const start = (opts: Omit<Parameters<typeof runConsumer>[0], 'js' | 'stream' | 'prefix'>) => {
    const runner = runConsumer({ js: nats.js, stream: inbox, prefix, pullExpiresMs: 1000, ...opts });
    runners.push(runner);
    return runner;
  };

  const consumerState = async (name: string) => {
    const info = await nats.jsm.consumers.info(inbox, name);
    return { pending: info.num_pending, ackPending: info.num_ack_pending, redelivered: info.num_redelivered };
  };

  const deadLetters = async () => {
    const dlq = batonStreamNames(prefix).dlq;
    const info = await nats.jsm.streams.info(dlq);
    const out = [];
    for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
      out.push(await nats.jsm.streams.getMessage(dlq, { seq }));
    }
    return out;
  };

  /** A runner on a new durable whose handler parses each body as JSON (poison when it is not). */
  const startJsonReader = async (name: string) => {
    await durable(name);
    const deliveries: ConsumedMessage[] = [];
    const outcomes: MessageOutcome[] = [];
    start({
      durable: name,
      onOutcome: (o) => outcomes.push(o),
      handler: async (msg) => {
        deliveries.push(msg);
        JSON.parse(new TextDecoder().decode(msg.data));
      },
    });
    return { deliveries, outcomes };
  };

  it('acks a message only after its handler resolved', async () => {
    await durable('ok');
    const seen: ConsumedMessage[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    start({
      durable: 'ok',
      handler: async (msg) => {
        seen.push(msg);
        await gate;
      },
    });
    await publish('p.result.a', '{"hello":1}');
    await waitFor(() => seen.length === 1, 'the message handled', { timeoutMs: 5000 });
    expect(await consumerState('ok')).toMatchObject({ ackPending: 1 });
    release();
    await waitFor(async () => (await consumerState('ok')).ackPending === 0, 'no ack pending', { timeoutMs: 5000 });
    expect(seen[0]!.subject).toBe(`${prefix}.in.p.result.a`);
    expect(seen[0]!.deliveryCount).toBe(1);
  });

  it('a message whose headers are named like Object.prototype members is handled and acked like any other (it used to wedge the consumer)', async () => {
    await durable('proto-headers');
    const seen: ConsumedMessage[] = [];
    start({ durable: 'proto-headers', handler: async (msg) => void seen.push(msg) });
    const hdrs = natsHeaders();
    for (const name of ['constructor', '__proto__', 'toString']) hdrs.append(name, `${name}-value`);
    await nats.js.publish(`${prefix}.in.p.result.proto`, new TextEncoder().encode('{"hello":1}'), { headers: hdrs });
    await publish('p.result.after', '{"hello":2}');
    await waitFor(() => seen.length === 2, 'both messages handled', { timeoutMs: 5000 });
    await waitFor(async () => (await consumerState('proto-headers')).ackPending === 0, 'no ack pending', { timeoutMs: 5000 });
    expect(seen[0]!.headers['constructor']).toEqual(['constructor-value']);
    expect(Object.getOwnPropertyDescriptor(seen[0]!.headers, '__proto__')?.value).toEqual(['__proto__-value']);
    expect(seen[0]!.headers['toString']).toEqual(['toString-value']);
    expect(await consumerState('proto-headers')).toEqual({ pending: 0, ackPending: 0, redelivered: 0 });
  });

  it('a transient failure is retried with a delay, never hot-looped', async () => {
    await durable('transient');
    const deliveries: number[] = [];
    const outcomes: MessageOutcome[] = [];
    start({
      durable: 'transient',
      backoffMs: [400, 400],
      maxDeliver: 5,
      onOutcome: (o) => outcomes.push(o),
      handler: async () => {
        deliveries.push(Date.now());
        if (deliveries.length < 3) throw new TransientError('redis is down');
      },
    });
    await publish('p.result.a', '{}');
    await waitFor(() => outcomes.some((o) => o.kind === 'acked'), 'an acked outcome', { timeoutMs: 5000 });
    expect(deliveries).toHaveLength(3);
    // After each failure, no delivery for the backoff (measured between the deliveries themselves:
    // a check from the test's own clock after it noticed the first read a loaded machine's delays).
    expect(deliveries[1]! - deliveries[0]!).toBeGreaterThanOrEqual(350);
    expect(deliveries[2]! - deliveries[1]!).toBeGreaterThanOrEqual(350);
    expect(outcomes.map((o) => o.kind)).toEqual(['retry', 'retry', 'acked']);
  });

  it('an unbounded TransientError (the infrastructure failing, not the message) is retried past maxDeliver, never dead-lettered, and handled once it passes', async () => {
    await durable('outage');
    const deliveries: number[] = [];
    const outcomes: MessageOutcome[] = [];
    start({
      durable: 'outage',
      backoffMs: [50],
      maxDeliver: 2,
      onOutcome: (o) => outcomes.push(o),
      handler: async (msg) => {
        deliveries.push(msg.deliveryCount);
        if (deliveries.length < 5) throw new TransientError('no ledger answered', { unbounded: true });
      },
    });
    await publish('p.result.outage', '{}');
    await waitFor(() => outcomes.some((o) => o.kind === 'acked'), 'handled after the outage', { timeoutMs: 5000 });
    expect(deliveries).toEqual([1, 2, 3, 4, 5]);
    expect(outcomes.map((o) => o.kind)).toEqual(['retry', 'retry', 'retry', 'retry', 'acked']);
    expect(await deadLetters()).toEqual([]);
    // A bounded one still gives up at maxDeliver.
    await durable('bounded');
    const bounded: MessageOutcome[] = [];
    start({
      durable: 'bounded',
      backoffMs: [50],
      maxDeliver: 2,
      onOutcome: (o) => bounded.push(o),
      handler: async () => Promise.reject(new TransientError('still down')),
    });
    await waitFor(() => bounded.some((o) => o.kind === 'dead_lettered'), 'the bounded one given up', { timeoutMs: 5000 });
    expect(bounded.map((o) => o.kind)).toEqual(['retry', 'dead_lettered']);
  });

  it('deliveries spent waiting out an outage do not count against maxDeliver when the message then fails for itself', async () => {
    await durable('after-outage');
    const failures: string[] = [];
    const outcomes: MessageOutcome[] = [];
    start({
      durable: 'after-outage',
      backoffMs: [50],
      maxDeliver: 3,
      onOutcome: (o) => outcomes.push(o),
      handler: async (msg) => {
        // Four deliveries of outage (past maxDeliver), then the message's own failures.
        if (msg.deliveryCount <= 4) {
          failures.push('outage');
          throw new TransientError('no ledger answered', { unbounded: true });
        }
        failures.push('own');
        throw new TransientError('the handoff is not there yet');
      },
    });
    await publish('p.result.after-outage', '{}');
    await waitFor(() => outcomes.some((o) => o.kind === 'dead_lettered'), 'given up after its own tries', { timeoutMs: 5000 });
    // Three tries of its own (maxDeliver), not a dead letter at the first one.
    expect(failures).toEqual(['outage', 'outage', 'outage', 'outage', 'own', 'own', 'own']);
    expect(outcomes.map((o) => o.kind)).toEqual(['retry', 'retry', 'retry', 'retry', 'retry', 'retry', 'dead_lettered']);
    const [letter] = await deadLetters();
    expect(letter!.header.get(DlqHeader.reason)).toBe('max_deliveries');
    expect(letter!.header.get(DlqHeader.deliveries)).toBe('7');
  });

  it('poison input is dead-lettered with its reason and original bytes, then terminated (delivered once)', async () => {
    const { deliveries, outcomes } = await startJsonReader('poison');
    const ack = await publish('p.result.a', '{not json', 'orig-1');
    await waitFor(() => outcomes.length === 1, 'one outcome', { timeoutMs: 5000 });
    expect(outcomes[0]).toMatchObject({ kind: 'dead_lettered', reason: 'malformed_json' });
    const [letter] = await deadLetters();
    expect(letter!.subject).toBe(`${prefix}.dlq.poison`);
    expect(new TextDecoder().decode(letter!.data)).toBe('{not json');
    expect(letter!.header.get(DlqHeader.reason)).toBe('malformed_json');
    expect(letter!.header.get(DlqHeader.subject)).toBe(`${prefix}.in.p.result.a`);
    expect(letter!.header.get(DlqHeader.seq)).toBe(String(ack.seq));
    expect(JSON.parse(letter!.header.get(DlqHeader.headers))).toMatchObject({ 'Nats-Msg-Id': ['orig-1'] });
    expect(letter!.header.get('Nats-Msg-Id')).toBe(`dlq:poison:${inbox}:${ack.seq}`);
    await sleep(300);
    expect(deliveries).toHaveLength(1);
    expect(await consumerState('poison')).toMatchObject({ pending: 0, ackPending: 0 });
  });

  it('two consumers giving up on one message write two letters, one per source (the letter id names the source)', async () => {
    const before = (await deadLetters()).length;
    const first = await startJsonReader('poison-one');
    const second = await startJsonReader('poison-two');
    const ack = await publish('p.result.b', '{twice');
    await waitFor(() => first.outcomes.length === 1 && second.outcomes.length === 1, 'both gave up', { timeoutMs: 5000 });
    const letters = (await deadLetters()).slice(before).filter((letter) => letter.header.get(DlqHeader.seq) === String(ack.seq));
    expect(letters.map((letter) => [letter.subject, letter.header.get('Nats-Msg-Id')]).sort()).toEqual([
      [`${prefix}.dlq.poison-one`, `dlq:poison-one:${inbox}:${ack.seq}`],
      [`${prefix}.dlq.poison-two`, `dlq:poison-two:${inbox}:${ack.seq}`],
    ]);
  });

  it('poison too large for a whole letter (its headers grow in JSON) is dead-lettered shortened, with its size and digest, then terminated (delivered once)', async () => {
    const { deliveries, outcomes } = await startJsonReader('poison-large');
    // Headers whose control bytes take 6 bytes each in JSON: the letter's header block would pass 64 KiB.
    const hdrs = natsHeaders();
    hdrs.set('X-Filler', '\u0001'.repeat(20 * 1024));
    const small = new TextEncoder().encode('{not json');
    const first = await nats.js.publish(`${prefix}.in.p.result.filler`, small, { headers: hdrs });
    // Bytes just under the server's max_payload: with the letter's own headers they would not fit.
    const large = new Uint8Array(1_045_000).fill(0x7b);
    const second = await nats.js.publish(`${prefix}.in.p.result.large`, large);
    await waitFor(() => outcomes.length === 2, 'two outcomes', { timeoutMs: 10_000 });
    expect(outcomes.map((o) => ({ kind: o.kind, reason: 'reason' in o ? o.reason : undefined }))).toEqual([
      { kind: 'dead_lettered', reason: 'malformed_json' },
      { kind: 'dead_lettered', reason: 'malformed_json' },
    ]);
    const letters = await deadLetters();
    const letterOf = (seq: number) => letters.find((l) => l.header.get(DlqHeader.seq) === String(seq))!;
    expect(letterOf(first.seq).header.get(DlqHeader.truncated)).toBe(String(small.length));
    expect(letterOf(first.seq).header.get(DlqHeader.headers)).toBe('{}');
    expect(letterOf(first.seq).data).toEqual(small); // the bytes fit: kept whole
    const cut = letterOf(second.seq);
    expect(cut.header.get(DlqHeader.truncated)).toBe(String(large.length));
    expect(cut.header.get(DlqHeader.sha256)).toBe(createHash('sha256').update(large).digest('hex'));
    expect(cut.data.length).toBeLessThan(large.length);
    await sleep(300);
    expect(deliveries).toHaveLength(2);
    expect(await consumerState('poison-large')).toMatchObject({ pending: 0, ackPending: 0 });
  });

  it('a PoisonError carries its own reason into the dead letter', async () => {
    await durable('poison2');
    const outcomes: MessageOutcome[] = [];
    start({ durable: 'poison2', onOutcome: (o) => outcomes.push(o), handler: async () => Promise.reject(new PoisonError('no such agent', 'unknown_agent')) });
    await publish('p.result.ghost', '{}');
    await waitFor(() => outcomes.length === 1, 'one outcome', { timeoutMs: 5000 });
    const [letter] = await deadLetters();
    expect(letter!.header.get(DlqHeader.reason)).toBe('unknown_agent');
    expect(letter!.header.get(DlqHeader.detail)).toContain('no such agent');
  });

  it('a message that keeps failing is dead-lettered after maxDeliver deliveries and not delivered again', async () => {
    await durable('exhaust');
    let deliveries = 0;
    const outcomes: MessageOutcome[] = [];
    start({
      durable: 'exhaust',
      maxDeliver: 3,
      backoffMs: [100],
      onOutcome: (o) => outcomes.push(o),
      handler: async () => {
        deliveries++;
        throw new Error('always fails');
      },
    });
    await publish('p.result.a', '{"x":1}');
    await waitFor(() => outcomes.some((o) => o.kind === 'dead_lettered'), 'a dead-lettered outcome', { timeoutMs: 5000 });
    await sleep(400);
    expect(deliveries).toBe(3);
    const [letter] = await deadLetters();
    expect(letter!.header.get(DlqHeader.reason)).toBe('max_deliveries');
    expect(letter!.header.get(DlqHeader.deliveries)).toBe('3');
    expect(new TextDecoder().decode(letter!.data)).toBe('{"x":1}');
  });

  describe('bounded by bytes (maxBytes)', () => {
    const LARGE = 200 * 1024;
    const backlog = async (count: number) => {
      const body = 'x'.repeat(LARGE);
      for (let i = 0; i < count; i++) await publish(`p.result.m${i}`, body);
    };

    it.each([
      { mode: 'handlers 32 at once', handleBatch: false },
      { mode: 'batches', handleBatch: true },
    ])('a backlog of large messages is held within the bound, then all handled ($mode)', async ({ handleBatch }) => {
      await backlog(40);
      await durable('bytes');
      const maxBytes = 1024 * 1024; // five messages of 200 KB
      let held = 0;
      let most = 0;
      let handled = 0;
      const gate: Array<() => void> = [];
      const hold = () => new Promise<void>((resolve) => gate.push(resolve));
      const track = async (n: number, work: () => Promise<void>) => {
        held += n;
        most = Math.max(most, held);
        await work();
        held -= n;
        handled += n;
      };
      start(
        handleBatch
          ? { durable: 'bytes', concurrency: 512, batch: 256, maxBytes, handleBatch: (msgs) => track(msgs.length, hold) }
          : { durable: 'bytes', concurrency: 32, batch: 100, maxBytes, handler: () => track(1, hold) },
      );
      try {
        // Let pulls come while nothing is settled: the runner stops at the bound.
        await waitFor(() => gate.length > 0, 'a first message held');
        await sleep(1500);
        const ackPending = (await consumerState('bytes')).ackPending;
        expect(ackPending).toBeGreaterThan(1);
        expect(ackPending * LARGE).toBeLessThanOrEqual(maxBytes);
      } finally {
        // Release what is held (also when a check failed, so the runner can stop) until all is handled.
        const deadline = Date.now() + 20_000;
        while (handled < 40 && Date.now() < deadline) {
          gate.splice(0).forEach((release) => release());
          await sleep(20);
        }
      }
      expect(handled).toBe(40);
      expect(most * LARGE).toBeLessThanOrEqual(maxBytes);
      await waitFor(async () => (await consumerState('bytes')).ackPending === 0, 'every message acked');
      expect(await consumerState('bytes')).toMatchObject({ pending: 0, redelivered: 0 });
    });

    it('large messages right after small ones: the server ends a pull at the bytes the runner may still hold, whatever count it asked for', async () => {
      for (let i = 0; i < 40; i++) await publish(`p.result.s${i}`, '{}');
      await backlog(20);
      await durable('mixed');
      // The pull requests the runner sends, as the server receives them.
      const asked: { batch: number; max_bytes: number }[] = [];
      const requests = nats.connection.subscribe(`$JS.API.CONSUMER.MSG.NEXT.${inbox}.mixed`, {
        callback: (_, msg) => void asked.push(JSON.parse(new TextDecoder().decode(msg.data)) as { batch: number; max_bytes: number }),
      });
      const maxBytes = 1024 * 1024;
      let heldLarge = 0;
      let most = 0;
      let handled = 0;
      const gate: Array<() => void> = [];
      start({
        durable: 'mixed',
        concurrency: 100,
        batch: 100,
        maxBytes,
        handler: async (msg) => {
          if (msg.data.length >= LARGE) {
            most = Math.max(most, ++heldLarge);
            await new Promise<void>((resolve) => gate.push(resolve));
            heldLarge--;
          }
          handled++;
        },
      });
      try {
        await waitFor(() => gate.length > 0, 'a first large message held');
        await sleep(1500);
        // After the small messages, the count asked for is large (it is sized from them); the
        // server's byte bound (never under twice the 1 MiB max_payload) keeps the large ones that
        // then come to what fits in it.
        expect(asked.some((pull) => pull.batch >= 20)).toBe(true);
        for (const pull of asked) expect(pull.max_bytes).toBeGreaterThanOrEqual(2 * 1024 * 1024);
        expect(most * LARGE).toBeLessThanOrEqual(2 * 1024 * 1024);
      } finally {
        const deadline = Date.now() + 20_000;
        while (handled < 60 && Date.now() < deadline) {
          gate.splice(0).forEach((release) => release());
          await sleep(20);
        }
        requests.unsubscribe();
      }
      expect(handled).toBe(60);
      await waitFor(async () => (await consumerState('mixed')).ackPending === 0, 'every message acked');
      expect(await consumerState('mixed')).toMatchObject({ pending: 0, redelivered: 0 });
    });

    it('a message larger than the whole bound is still delivered, alone', async () => {
      await backlog(3);
      await durable('tiny');
      const sizes: number[] = [];
      start({ durable: 'tiny', concurrency: 8, maxBytes: 1024, handler: async (msg) => void sizes.push(msg.data.length) });
      await waitFor(() => sizes.length === 3, 'the three messages handled');
      expect(sizes).toEqual([LARGE, LARGE, LARGE]);
    });
  });

  it('under a steady flow whose pulls expire before they fill, no pull holds the consumer past its expiry (nats-server 2.9 may expire one without a word)', async () => {
    await durable('steady');
    // When each message's publish was acknowledged (stream sequence n + 1): from then on it was
    // stored and a pull could take it.
    const storedAt: number[] = [];
    const publisher = steadyPublisher(async (n) => {
      await publish(`p.result.s${n % 5}`, String(n));
      storedAt[n + 1] = Date.now();
    });
    const handled: number[] = [];
    // The longest a stored message waited while the one before it was already handled: the time
    // the consumer sat idle with work available. A plain gap between handled messages also counts
    // a publisher that stalled (session 47 saw one 9.5 s gap on a loaded CI machine), which is no
    // fault of the runner's; the runner's own start-up is not counted either.
    let lastAt: number | null = null;
    let longestIdle = 0;
    // Pulls of up to a million messages (the byte bound sizes them to tens of thousands): each
    // one ends at its 1 s expiry while messages keep coming.
    start({
      durable: 'steady',
      batch: 1_000_000,
      handler: async (msg) => {
        const now = Date.now();
        // A message may reach the handler before its publisher hears the ack (storedAt unset):
        // it waited for nothing.
        const available = Math.max(lastAt ?? now, storedAt[msg.seq] ?? now);
        longestIdle = Math.max(longestIdle, now - available);
        lastAt = now;
        handled.push(msg.seq);
      },
    });
    await sleep(4500);
    const published = await publisher.stop();
    await waitFor(() => handled.length === published, 'every message handled');
    // One handler at a time: stream order, each once.
    expect(handled).toEqual(Array.from({ length: published }, (_, i) => i + 1));
    // An unannounced expiry used to hold the consumer a second past the pull's last message while
    // the next ones waited (~1 s or more); a pull is now given up 100 ms past its expiry.
    expect(longestIdle).toBeLessThan(700);
    await waitFor(async () => (await consumerState('steady')).ackPending === 0, 'every message acked');
    expect(await consumerState('steady')).toMatchObject({ pending: 0, redelivered: 0 });
  });

  /*
   * The server's side is played over core NATS (the runner's JetStream API prefix is one this test
   * answers): the consumer's info is answered once, its pulls never, and its later info requests
   * time out — as while a cluster elects the consumer's leader.
   */
  it('a deleted-consumer check that times out after an unanswered pull is no failure: the runner pulls again at once, without backoff', async () => {
    const apiPrefix = `${prefix}.api`;
    const pulls: number[] = [];
    let infos = 0;
    const info = nats.connection.subscribe(`${apiPrefix}.CONSUMER.INFO.S.c`, {
      callback: (_e, msg) => {
        infos++;
        if (infos > 1) return;
        const now = new Date().toISOString();
        const position = { consumer_seq: 0, stream_seq: 0 };
        msg.respond(
          JSON.stringify({
            type: 'io.nats.jetstream.api.v1.consumer_info_response',
            stream_name: 'S',
            name: 'c',
            created: now,
            ts: now,
            config: {
              durable_name: 'c',
              name: 'c',
              ack_policy: 'explicit',
              deliver_policy: 'all',
              replay_policy: 'instant',
              ack_wait: 30_000_000_000,
              max_deliver: -1,
            },
            delivered: position,
            ack_floor: position,
            num_ack_pending: 0,
            num_redelivered: 0,
            num_waiting: 0,
            num_pending: 0,
          }),
        );
      },
    });
    const next = nats.connection.subscribe(`${apiPrefix}.CONSUMER.MSG.NEXT.S.c`, { callback: () => pulls.push(Date.now()) });
    await nats.connection.flush();
    const errors: unknown[] = [];
    const runner = runConsumer({
      js: nats.connection.jetstream({ apiPrefix, timeout: 300 }),
      stream: 'S',
      durable: 'c',
      prefix,
      pullExpiresMs: 1000,
      onError: (error) => errors.push(error),
      handler: async () => undefined,
    });
    runners.push(runner);
    try {
      // Each round: a pull of 1 s, 100 ms of grace, a 300 ms info timeout. A runner that took the
      // timeout for a failure backed off 1 s, then 2 s, and asked for the consumer again (unanswered).
      await waitFor(() => pulls.length >= 4, 'four pulls', { timeoutMs: 8000 });
      expect(errors).toEqual([]);
      expect(infos).toBeGreaterThanOrEqual(4);
      for (let i = 1; i < pulls.length; i++) expect(pulls[i]! - pulls[i - 1]!).toBeLessThan(1000 + 100 + 300 + 600);
    } finally {
      await runner.stop();
      info.unsubscribe();
      next.unsubscribe();
    }
  });

  it('sends in-progress heartbeats so a handler slower than the ack wait is not redelivered', async () => {
    await durable('slow', 1000);
    let deliveries = 0;
    const outcomes: MessageOutcome[] = [];
    start({
      durable: 'slow',
      // A free second slot would pick up a redelivery at once if the heartbeats were missing.
      concurrency: 2,
      onOutcome: (o) => outcomes.push(o),
      handler: async () => {
        deliveries++;
        await sleep(2500);
      },
    });
    await publish('p.result.a', '{}');
    await waitFor(() => outcomes.length === 1, 'one outcome', { timeoutMs: 6000 });
    expect(outcomes[0]!.kind).toBe('acked');
    expect(deliveries).toBe(1);
    // A plain ack: the server applies it on its own time.
    await waitFor(async () => (await consumerState('slow')).ackPending === 0, 'the ack applied', { timeoutMs: 5000 });
    expect(await consumerState('slow')).toMatchObject({ redelivered: 0, ackPending: 0 });
  });

  it('graceful stop stops pulling, finishes in-flight work and acks it', async () => {
    await durable('graceful');
    let started = 0;
    let finished = 0;
    const runner = start({
      durable: 'graceful',
      concurrency: 2,
      handler: async () => {
        started++;
        await sleep(600);
        finished++;
      },
    });
    await publish('p.result.a', '1');
    await publish('p.result.b', '2');
    await waitFor(() => started === 2, 'both handlers started', { timeoutMs: 5000 });
    await runner.stop();
    expect(finished).toBe(2);
    // The stop has flushed the acks to the server, which applies them on its own time (no redelivery).
    await waitFor(async () => (await consumerState('graceful')).ackPending === 0, 'both acks applied', { timeoutMs: 5000 });
    expect(await consumerState('graceful')).toMatchObject({ pending: 0, ackPending: 0, redelivered: 0 });
    // Nothing is pulled after the stop.
    await publish('p.result.c', '3');
    await sleep(300);
    expect(started).toBe(2);
    expect((await consumerState('graceful')).pending).toBe(1);
  });
  it('a message arriving while a runner stops goes back to the stream once, not in a loop: the next runner sees it at its second delivery', async () => {
    await durable('drain');
    let release: () => void = () => undefined;
    const busy = new Promise<void>((resolve) => (release = resolve));
    let firstStarted = false;
    const first = start({
      durable: 'drain',
      concurrency: 1,
      pullExpiresMs: 3000,
      handler: async () => {
        firstStarted = true;
        await busy;
      },
    });
    await publish('p.result.slow', '1');
    await waitFor(() => firstStarted, 'the slow handler started', { timeoutMs: 5000 });
    const stopped = first.stop();
    // Arrives while the runner stops: its pull is still open (it is left to expire).
    await publish('p.result.late', '2');
    await sleep(1500);
    release();
    await stopped;
    const seen: Array<{ subject: string; deliveryCount: number }> = [];
    start({
      durable: 'drain',
      handler: async (msg: ConsumedMessage) => {
        seen.push({ subject: msg.subject, deliveryCount: msg.deliveryCount });
      },
    });
    await waitFor(() => seen.some((m) => m.subject.endsWith('.late')), 'the late message handled by the next runner', { timeoutMs: 10_000 });
    const late = seen.find((m) => m.subject.endsWith('.late'))!;
    expect(late.deliveryCount).toBeLessThanOrEqual(2);
  });
});
