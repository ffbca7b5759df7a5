import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { Controller, Module, type INestMicroservice } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventPattern, Payload } from '@nestjs/microservices';
import { headers as natsHeaders } from 'nats';
import { z } from 'zod';
import { PoisonError, batonStreamNames, batonTopology, connectNats, provision, type MessageOutcome, type NatsHandle } from '@baton/eventstore';
import { waitFor } from '@baton/wait';
import { JsonLogger } from '../logging/logger';
import { inboxLetterGate, RefusedLetterCap, RefusedLetters } from '../refusals';
import { JetStreamExceptionFilter } from './jetstream.exception-filter';
import { JetStreamServer } from './jetstream.server';
import { durableNameFor } from './subject';

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const encoder = new TextEncoder();
const STARTS = '{prefix}.in.*.start';
const RESULTS = '{prefix}.in.*.result.*';
const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';

@Controller()
class StartsController {
  /** Refuses every start the way the router refuses one for a workflow the project has not published. */
  @EventPattern(STARTS, { dlqSource: 'router-starts' })
  onStart(@Payload() _data: unknown): void {
    throw new PoisonError('unknown_workflow: the project has not published workflow "diag"', 'unknown_workflow');
  }

  /** A consumer whose handler checks a schema (a failure is schema_violation), without a readable source of its own. */
  @EventPattern(RESULTS)
  onResult(@Payload() data: unknown): void {
    z.object({ ok: z.literal(true) }).parse(data);
  }
}

@Module({ controllers: [StartsController] })
class StartsModule {}

describe('JetStreamServer: the log line of a dead-lettered message is structured (real NATS)', () => {
  let prefix: string;
  let nats: NatsHandle;
  let app: INestMicroservice | null = null;
  let outcomes: MessageOutcome[];
  let lines: Array<Record<string, unknown>>;

  beforeEach(async () => {
    outcomes = [];
    lines = [];
    prefix = `t${randomBytes(5).toString('hex')}`;
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
    const server = new JetStreamServer({
      name: 'router',
      prefix,
      connect: { servers: NATS_URL, reconnect: false },
      consumer: { pullExpiresMs: 1000, backoffMs: [300], maxDeliver: 2 },
      onOutcome: (o) => outcomes.push(o),
    });
    // The services' JSON logger, its lines captured instead of written to stdout.
    const logger = new JsonLogger('router', 'info', {}, (line) => lines.push(JSON.parse(line) as Record<string, unknown>));
    app = await NestFactory.createMicroservice(StartsModule, { strategy: server, logger });
    app.useGlobalFilters(new JetStreamExceptionFilter());
    await app.listen();
  });

  afterEach(async () => {
    await app?.close();
    app = null;
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
    await nats.close();
  });

  const deadLettered = (subject: string) => lines.find((l) => l['msg'] === 'message dead-lettered' && l['subject'] === subject);

  it('carries a fixed msg and source, durable, reason, detail, subject, stream_seq, project, trace_id and the ids the body names', async () => {
    const subject = `${prefix}.in.bb-diag-1.start`;
    const hdrs = natsHeaders();
    hdrs.set('traceparent', `00-${TRACE_ID}-b7ad6b7169203331-01`);
    const body = JSON.stringify({ workflow_run_id: 'bb-run-1', workflow: 'diag', started_by: 'sre', handoff_id: 'not an id' });
    const ack = await nats.js.publish(subject, encoder.encode(body), { headers: hdrs });
    const line = await waitFor(() => deadLettered(subject), 'the dead-lettering log line', { timeoutMs: 10_000 });

    expect(line).toEqual({
      time: expect.any(String),
      level: 'warn',
      service: 'router',
      msg: 'message dead-lettered',
      source: 'router-starts',
      durable: durableNameFor('router', STARTS),
      reason: 'unknown_workflow',
      detail: 'PoisonError: unknown_workflow: the project has not published workflow "diag"',
      subject,
      stream_seq: ack.seq,
      project: 'bb-diag-1',
      trace_id: TRACE_ID,
      workflow_run_id: 'bb-run-1',
      context: 'Server',
    });
    // The line is the letter's: same source, reason and original.
    const letter = await nats.jsm.streams.getMessage(batonStreamNames(prefix).dlq, { last_by_subj: `${prefix}.dlq.router-starts` });
    expect([letter.header.get('Baton-Dlq-Reason'), letter.header.get('Baton-Dlq-Seq')]).toEqual(['unknown_workflow', String(ack.seq)]);
  });

  it('a malformed body, or one without a trace, still gives the line its source, reason and project, without ids', async () => {
    const subject = `${prefix}.in.acme.result.support`;
    const ack = await nats.js.publish(subject, encoder.encode('{"workflow_run_id": "wr-1", '));
    const line = await waitFor(() => deadLettered(subject), 'the dead-lettering log line', { timeoutMs: 10_000 });
    expect(line).toMatchObject({
      level: 'warn',
      // A consumer without dlqSource writes its letters under its durable; a durable Baton knows is
      // logged by its readable name, as `baton dlq list` shows it.
      source: 'router-results',
      durable: durableNameFor('router', RESULTS),
      reason: 'malformed_json',
      subject,
      stream_seq: ack.seq,
      project: 'acme',
    });
    expect(String(line['detail'])).toMatch(/^PoisonError: body is not JSON/);
    expect(line).not.toHaveProperty('workflow_run_id');
    expect(line).not.toHaveProperty('trace_id');

    const valid = `${prefix}.in.acme.result.other`;
    await nats.js.publish(valid, encoder.encode('{"ok":false,"workflow_run_id":"wr-2","result_id":"res-2"}'));
    const schema = await waitFor(() => deadLettered(valid), 'the schema_violation line', { timeoutMs: 10_000 });
    expect(schema).toMatchObject({ reason: 'schema_violation', project: 'acme', workflow_run_id: 'wr-2', result_id: 'res-2' });
    expect(String(schema['detail'])).toMatch(/^ZodError: /);
    // No unstructured `dead_lettered` line is left.
    expect(lines.filter((l) => String(l['msg']).includes('dead_lettered'))).toEqual([]);
    expect(outcomes.filter((o) => o.kind === 'dead_lettered')).toHaveLength(2);
  });
});

describe('JetStreamServer with the inbox letter gate: one line per letter, none per refusal past the budget (real NATS)', () => {
  it('logs a refused agent input once, with its sender and durable, and past the sender`s budget only the budget`s one line', async () => {
    const prefix = `t${randomBytes(5).toString('hex')}`;
    const nats = await connectNats({ servers: NATS_URL, reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
    const lines: Array<Record<string, unknown>> = [];
    const logger = new JsonLogger('router', 'info', {}, (line) => lines.push(JSON.parse(line) as Record<string, unknown>));
    const letters = new RefusedLetters(
      { nats, config: { BATON_PREFIX: prefix } as never, logger: logger.child({}), instance: 'router-t' },
      new RefusedLetterCap(2, 60_000),
      'refusals',
    );
    const outcomes: MessageOutcome[] = [];
    const server = new JetStreamServer({
      name: 'router',
      prefix,
      connect: { servers: NATS_URL, reconnect: false },
      consumer: { pullExpiresMs: 1000, backoffMs: [300], maxDeliver: 2 },
      letterGate: inboxLetterGate(prefix, letters),
      onOutcome: (o) => outcomes.push(o),
    });
    const app = await NestFactory.createMicroservice(StartsModule, { strategy: server, logger });
    app.useGlobalFilters(new JetStreamExceptionFilter());
    await app.listen();
    try {
      // Five refused results of one agent: two letters (its budget), three counted for its summary.
      for (let i = 0; i < 5; i++) await nats.js.publish(`${prefix}.in.acme.result.flood`, encoder.encode(`{"n": ${i}, `));
      await waitFor(() => (outcomes.filter((o) => o.kind === 'dead_lettered').length >= 5 ? true : undefined), 'five refusals handled', { timeoutMs: 15_000 });
      expect(outcomes.every((o) => o.kind !== 'dead_lettered' || o.gated)).toBe(true);
      const logged = lines.filter((l) => l['msg'] === 'message dead-lettered');
      expect(logged).toHaveLength(2);
      for (const line of logged)
        expect(line).toMatchObject({ sender: 'acme/flood', durable: durableNameFor('router', RESULTS), reason: 'malformed_json', project: 'acme' });
      expect(lines.filter((l) => String(l['msg']).startsWith('refused refusals over budget'))).toHaveLength(1);
    } finally {
      await app.close();
      await letters.stop();
      const names = batonStreamNames(prefix);
      for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
      await nats.close();
    }
  });
});
