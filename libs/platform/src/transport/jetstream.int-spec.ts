import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { Controller, Module, type INestMicroservice } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, EventPattern, MessagePattern, Payload } from '@nestjs/microservices';
import { z } from 'zod';
import {
  DlqHeader,
  TransientError,
  batonStreamNames,
  batonTopology,
  connectNats,
  headersFrom,
  provision,
  type MessageOutcome,
  type NatsHandle,
} from '@baton/eventstore';
import { waitFor } from '@baton/wait';
import { JetStreamClient, RequestError } from './jetstream.client';
import { JetStreamContext, NatsRequestContext } from './jetstream.context';
import { JetStreamExceptionFilter } from './jetstream.exception-filter';
import { JetStreamServer } from './jetstream.server';
import { durableNameFor } from './subject';

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const ResultSchema = z.object({ id: z.string(), step: z.number().int() });

interface Seen {
  data: unknown;
  subject: string;
  seq: number;
  deliveryCount: number;
  header: string | undefined;
}

/** What the controller saw; reset per test. */
const probe = {
  seen: [] as Seen[],
  typed: [] as Array<{ data: unknown; type: string | undefined }>,
  /** What the run-ordered handler did, in order: `start <id>` / `end <id>`. */
  runSteps: [] as string[],
  transientFailures: 0,
  slowFinished: 0,
  reset() {
    this.seen = [];
    this.typed = [];
    this.runSteps = [];
    this.transientFailures = 0;
    this.slowFinished = 0;
  },
};

@Controller()
class ResultsController {
  @EventPattern('{prefix}.in.*.result.*')
  async onResult(@Payload() data: unknown, @Ctx() ctx: JetStreamContext): Promise<void> {
    probe.seen.push({ data, subject: ctx.subject, seq: ctx.seq, deliveryCount: ctx.deliveryCount, header: ctx.header('Trace-Id') });
    const result = ResultSchema.parse(data);
    if (result.step === 99 && probe.transientFailures++ === 0) throw new TransientError('store busy', { delayMs: 300 });
    if (result.step === 42) {
      await sleep(700);
      probe.slowFinished++;
    }
  }

  @MessagePattern('{prefix}.cmd.ledger.*.ping')
  ping(@Payload() data: { n: number }, @Ctx() ctx: NatsRequestContext): { pong: number; subject: string } {
    const { n } = z.object({ n: z.number() }).parse(data);
    if (n === 13) throw new Error('the handler broke');
    return { pong: n + 1, subject: ctx.subject };
  }
}

@Controller()
class EscalationsProbe {
  @EventPattern('{prefix}.ev.*.handoff.*', { eventTypes: ['handoff.escalated'] })
  onHandoff(@Payload() data: unknown, @Ctx() ctx: JetStreamContext): void {
    probe.typed.push({ data, type: ctx.header('Baton-Event-Type') });
  }
}

@Controller()
class RunOrderedProbe {
  @EventPattern('{prefix}.in.*.stop', { concurrency: 8, orderingKey: { bodyField: 'run' } })
  async onStop(@Payload() data: unknown): Promise<void> {
    const { id, ms } = z.object({ id: z.string(), run: z.string(), ms: z.number() }).parse(data);
    probe.runSteps.push(`start ${id}`);
    await sleep(ms);
    probe.runSteps.push(`end ${id}`);
  }
}

@Module({ controllers: [ResultsController, EscalationsProbe, RunOrderedProbe] })
class TestModule {}

describe('JetStreamServer in a Nest microservice (real NATS)', () => {
  let prefix: string;
  let nats: NatsHandle;
  let app: INestMicroservice | null;
  let client: JetStreamClient;
  let outcomes: MessageOutcome[];

  const startApp = async () => {
    const server = new JetStreamServer({
      name: 'svc',
      prefix,
      connect: { servers: NATS_URL, reconnect: false },
      consumer: { pullExpiresMs: 1000, backoffMs: [300], maxDeliver: 3 },
      onOutcome: (o) => outcomes.push(o),
    });
    const instance = await NestFactory.createMicroservice(TestModule, { strategy: server, logger: false });
    instance.useGlobalFilters(new JetStreamExceptionFilter());
    await instance.listen();
    app = instance;
    return instance;
  };

  const durable = () => durableNameFor('svc', '{prefix}.in.*.result.*');

  beforeEach(async () => {
    probe.reset();
    outcomes = [];
    app = null;
    prefix = `t${randomBytes(5).toString('hex')}`;
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
    client = new JetStreamClient(nats);
  });

  afterEach(async () => {
    await app?.close();
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
    await nats.close();
  });

  it('delivers a stream message to its @EventPattern handler with its context, and acks it', async () => {
    await startApp();
    const ack = await client.publish(`${prefix}.in.p1.result.coder`, { id: 'r-1', step: 1 }, { headers: { 'Trace-Id': 'abc' } });
    await waitFor(() => outcomes.length === 1, 'one outcome', { timeoutMs: 5000 });
    expect(outcomes[0]!.kind).toBe('acked');
    expect(probe.seen).toEqual([{ data: { id: 'r-1', step: 1 }, subject: `${prefix}.in.p1.result.coder`, seq: ack.seq, deliveryCount: 1, header: 'abc' }]);
    // The ack is a plain publish on the service's connection: this connection's request may reach
    // the server before it, so wait (briefly) for the server to have applied it.
    const settled = await waitFor(
      async () => {
        const info = await nats.jsm.consumers.info(batonStreamNames(prefix).inbox, durable());
        return info.num_ack_pending === 0 && info.num_pending === 0 ? info : null;
      },
      'the server to apply the ack',
      { timeoutMs: 5000 },
    );
    expect(settled).toMatchObject({ num_ack_pending: 0, num_pending: 0, num_redelivered: 0 });
  });

  it('eventTypes: only events of the listed types reach the handler; others are acked without their body being parsed', async () => {
    await startApp();
    const subject = `${prefix}.ev.p1.handoff.h1`;
    const encoder = new TextEncoder();
    await nats.js.publish(subject, encoder.encode('not json {'), { headers: headersFrom({ 'Baton-Event-Type': 'handoff.created' }) });
    await nats.js.publish(subject, encoder.encode('{}'));
    await nats.js.publish(subject, encoder.encode('{"x":1}'), { headers: headersFrom({ 'Baton-Event-Type': 'handoff.escalated' }) });
    await waitFor(() => outcomes.length === 3, 'three outcomes', { timeoutMs: 5000 });
    expect(outcomes.map((o) => [o.kind, o.msg.seq])).toEqual([
      ['acked', 1],
      ['acked', 2],
      ['acked', 3],
    ]);
    expect(probe.typed).toEqual([{ data: { x: 1 }, type: 'handoff.escalated' }]);
  });

  it('orderingKey { bodyField }: messages naming the same run one at a time in order, other runs meanwhile; a body that is not JSON is dead-lettered', async () => {
    await startApp();
    const subject = `${prefix}.in.p1.stop`;
    await client.publish(subject, { id: 'a1', run: 'A', ms: 600 });
    await client.publish(subject, { id: 'a2', run: 'A', ms: 0 });
    await client.publish(subject, { id: 'b1', run: 'B', ms: 0 });
    await nats.js.publish(subject, new TextEncoder().encode('{ not json'));
    await waitFor(() => outcomes.length === 4, 'four outcomes', { timeoutMs: 10_000 });
    // b1 ran while a1 slept; a2 waited for a1.
    expect(probe.runSteps.indexOf('end b1')).toBeLessThan(probe.runSteps.indexOf('end a1'));
    expect(probe.runSteps.indexOf('end a1')).toBeLessThan(probe.runSteps.indexOf('start a2'));
    expect(probe.runSteps.filter((step) => step.startsWith('start'))).toHaveLength(3);
    expect(outcomes.map((o) => o.kind).sort()).toEqual(['acked', 'acked', 'acked', 'dead_lettered']);
    expect(outcomes.find((o) => o.kind === 'dead_lettered')!.msg.seq).toBe(4);
  });

  it('publishOwned: a message published again under its id is stored once; an id another publisher took on another subject does not drop it', async () => {
    const stop = `${prefix}.in.p1.stop`;
    const first = await client.publishOwned(stop, { id: 'pk-1' }, 'stop:p1:pk-1');
    const again = await client.publishOwned(stop, { id: 'pk-1' }, 'stop:p1:pk-1');
    expect(again).toMatchObject({ duplicate: true, seq: first.seq, foreign: [] });
    const taken = await client.publish(`${prefix}.in.p2.result.mallory`, {}, { msgId: 'stop:p1:pk-2' });
    const stored = await client.publishOwned(stop, { id: 'pk-2' }, 'stop:p1:pk-2');
    expect(stored).toMatchObject({ duplicate: false, msgId: `stop:p1:pk-2:1:${taken.seq}`, foreign: [{ seq: taken.seq }] });
  });

  it("an inbox message under another project's or another kind's Nats-Msg-Id (taken to drop the real one as its duplicate) is dead-lettered msg_id_mismatch, the handler never sees it; Baton's own ids and ids of another form pass", async () => {
    await startApp();
    const subject = `${prefix}.in.p1.result.coder`;
    await client.publish(subject, { id: 'r-squat', step: 1 }, { msgId: 'start:p2:victim' });
    await client.publish(subject, { id: 'r-kind', step: 1 }, { msgId: 'start:p1:victim' });
    await client.publish(subject, { id: 'r-own', step: 1 }, { msgId: 'result:p1:r-own' });
    await client.publish(subject, { id: 'r-rekeyed', step: 1 }, { msgId: 'result:p1:r-x:1:42' });
    await client.publish(subject, { id: 'r-other', step: 1 }, { msgId: 'my-scheme-123' });
    await waitFor(() => outcomes.length === 5 || undefined, 'five outcomes', { timeoutMs: 5000 });
    expect(outcomes.map((o) => (o.kind === 'dead_lettered' ? o.reason : o.kind))).toEqual(['msg_id_mismatch', 'msg_id_mismatch', 'acked', 'acked', 'acked']);
    expect(probe.seen.map((s) => (s.data as { id: string }).id)).toEqual(['r-own', 'r-rekeyed', 'r-other']);
    const letter = await nats.jsm.streams.getMessage(batonStreamNames(prefix).dlq, { last_by_subj: `${prefix}.dlq.${durable()}` });
    expect(letter.header.get(DlqHeader.reason)).toBe('msg_id_mismatch');
    expect(letter.header.get(DlqHeader.detail)).toContain('names a start, the subject a result');
  });

  it('a thrown TransientError naks with a delay and the message is handled on a later delivery', async () => {
    await startApp();
    await client.publish(`${prefix}.in.p1.result.coder`, { id: 'r-t', step: 99 });
    await waitFor(() => outcomes.some((o) => o.kind === 'acked'), 'an acked outcome', { timeoutMs: 5000 });
    expect(outcomes.map((o) => o.kind)).toEqual(['retry', 'acked']);
    expect(outcomes[0]).toMatchObject({ delayMs: 300 });
    expect(probe.seen.map((s) => s.deliveryCount)).toEqual([1, 2]);
  });

  it('a schema violation is dead-lettered with its reason and original bytes, and terminated', async () => {
    await startApp();
    const bytes = new TextEncoder().encode('{"id":"r-bad","step":"one"}');
    await client.publish(`${prefix}.in.p1.result.coder`, bytes);
    await waitFor(() => outcomes.length === 1, 'one outcome', { timeoutMs: 5000 });
    expect(outcomes[0]).toMatchObject({ kind: 'dead_lettered', reason: 'schema_violation' });
    const letter = await nats.jsm.streams.getMessage(batonStreamNames(prefix).dlq, { last_by_subj: `${prefix}.dlq.${durable()}` });
    expect(letter.header.get(DlqHeader.reason)).toBe('schema_violation');
    expect(letter.data).toEqual(bytes);
    await sleep(400);
    expect(probe.seen).toHaveLength(1);
  });

  it('a @MessagePattern answers a core NATS request; a bad request gets a typed error reply', async () => {
    await startApp();
    const reply = await client.request<{ pong: number; subject: string }>(`${prefix}.cmd.ledger.p1.ping`, { n: 1 });
    expect(reply).toEqual({ pong: 2, subject: `${prefix}.cmd.ledger.p1.ping` });
    const failure = await client.request(`${prefix}.cmd.ledger.p1.ping`, { n: 'x' }).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(RequestError);
    expect((failure as RequestError).reply).toMatchObject({ ok: false, error: { code: 'schema_violation', kind: 'rejection', issues: [{ path: 'n' }] } });
    // A handler that fails answers the same shape, without leaking what broke.
    const broken = await client.request(`${prefix}.cmd.ledger.p1.ping`, { n: 13 }).catch((e: unknown) => e);
    expect((broken as RequestError).reply).toEqual({
      ok: false,
      error: { code: 'internal_error', kind: 'internal', message: 'the handler failed; see the service log', issues: [] },
    });
  });

  it('shutdown stops pulling, finishes the in-flight handler and acks it before closing', async () => {
    const instance = await startApp();
    await client.publish(`${prefix}.in.p1.result.coder`, { id: 'r-slow', step: 42 });
    await waitFor(() => probe.seen.length === 1, 'the handler to be called', { timeoutMs: 5000 });
    await instance.close();
    app = null;
    expect(probe.slowFinished).toBe(1);
    expect(outcomes.map((o) => o.kind)).toEqual(['acked']);
    const info = await nats.jsm.consumers.info(batonStreamNames(prefix).inbox, durable());
    expect(info.num_ack_pending).toBe(0);
  });

  it('a durable deleted under the running service: the service stays up, the durable is re-created after its ack floor, later messages are handled and earlier ones are not redelivered or dead-lettered again', async () => {
    const crashes: unknown[] = [];
    const onCrash = (error: unknown) => crashes.push(error);
    process.on('unhandledRejection', onCrash);
    process.on('uncaughtException', onCrash);
    try {
      await startApp(); // no 'error' listener of its own: the transport's default one logs
      const inbox = batonStreamNames(prefix).inbox;
      await client.publish(`${prefix}.in.p1.result.coder`, { id: 'before-1', step: 1 });
      await client.publish(`${prefix}.in.p1.result.coder`, new TextEncoder().encode('{"id":"before-bad","step":"one"}'));
      await waitFor(() => outcomes.length === 2, 'two outcomes', { timeoutMs: 5000 });
      const lastSeq = (await nats.jsm.streams.info(inbox)).state.last_seq;
      const floorAt = Date.now() + 5000;
      while ((await nats.jsm.consumers.info(inbox, durable())).ack_floor.stream_seq < lastSeq && Date.now() < floorAt) await sleep(20);
      await sleep(1500); // the runner reads the ack floor within a second of its last ack

      await nats.jsm.consumers.delete(inbox, durable());
      await client.publish(`${prefix}.in.p1.result.coder`, { id: 'after-1', step: 1 });
      await waitFor(() => probe.seen.some((s) => (s.data as { id: string }).id === 'after-1'), 'after-1 handled', { timeoutMs: 15_000 });
      await sleep(1000);

      expect(probe.seen.map((s) => (s.data as { id: string }).id)).toEqual(['before-1', 'before-bad', 'after-1']);
      // (An ack is reported once the server confirmed it, so its order against the next dead letter varies.)
      expect(outcomes.map((o) => o.kind).sort()).toEqual(['acked', 'acked', 'dead_lettered']);
      expect((await nats.jsm.streams.info(batonStreamNames(prefix).dlq)).state.messages).toBe(1);
      const info = await nats.jsm.consumers.info(inbox, durable());
      expect(info.config).toMatchObject({ deliver_policy: 'by_start_sequence', opt_start_seq: lastSeq + 1 });
      expect(crashes).toEqual([]);
    } finally {
      process.off('unhandledRejection', onCrash);
      process.off('uncaughtException', onCrash);
    }
  });
});
