import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { Controller, Module, type INestMicroservice } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { z } from 'zod';
import { DlqHeader, batonStreamNames, batonTopology, connectNats, provision, type MessageOutcome, type NatsHandle } from '@baton/eventstore';
import { JetStreamContext } from './jetstream.context';
import { JetStreamExceptionFilter } from './jetstream.exception-filter';
import { JetStreamServer } from './jetstream.server';
import { durableNameFor } from './subject';

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const STOPS = '{prefix}.in.*.stop';
const RESULTS = '{prefix}.in.*.result.*';

@Controller()
class ProbeController {
  /** A consumer with a readable dead-letter source of its own. */
  @EventPattern(STOPS, { dlqSource: 'svc-stops' })
  onStop(@Payload() data: unknown, @Ctx() _ctx: JetStreamContext): void {
    z.object({ id: z.string() }).parse(data);
  }

  /** A consumer without one: its letters name its durable. */
  @EventPattern(RESULTS)
  onResult(@Payload() data: unknown): void {
    z.object({ id: z.string() }).parse(data);
  }
}

@Module({ controllers: [ProbeController] })
class ProbeModule {}

describe('JetStreamServer dead-letter sources (real NATS)', () => {
  let prefix: string;
  let nats: NatsHandle;
  let app: INestMicroservice | null = null;
  let outcomes: MessageOutcome[];

  beforeEach(async () => {
    outcomes = [];
    prefix = `t${randomBytes(5).toString('hex')}`;
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
    const server = new JetStreamServer({
      name: 'svc',
      prefix,
      connect: { servers: NATS_URL, reconnect: false },
      consumer: { pullExpiresMs: 1000, backoffMs: [300], maxDeliver: 2 },
      onOutcome: (o) => outcomes.push(o),
    });
    app = await NestFactory.createMicroservice(ProbeModule, { strategy: server, logger: false });
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

  async function until(check: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!check()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(20);
    }
  }

  const letterOn = (source: string) => nats.jsm.streams.getMessage(batonStreamNames(prefix).dlq, { last_by_subj: `${prefix}.dlq.${source}` });

  it('a consumer given dlqSource dead-letters under that readable name; its durable keeps the derived name; a consumer without one uses its durable', async () => {
    await nats.js.publish(`${prefix}.in.p1.stop`, new TextEncoder().encode('{"id":7}'));
    await nats.js.publish(`${prefix}.in.p1.result.a`, new TextEncoder().encode('{"id":8}'));
    await until(() => outcomes.filter((o) => o.kind === 'dead_lettered').length === 2, 'two dead letters');

    const stop = await letterOn('svc-stops');
    expect(stop.header.get(DlqHeader.source)).toBe('svc-stops');
    expect(stop.header.get(DlqHeader.reason)).toBe('schema_violation');
    // The letter still says which durable gave up, and the durable was never renamed.
    expect(stop.header.get(DlqHeader.consumer)).toBe(durableNameFor('svc', STOPS));
    await expect(nats.jsm.consumers.info(batonStreamNames(prefix).inbox, durableNameFor('svc', STOPS))).resolves.toBeDefined();

    const result = await letterOn(durableNameFor('svc', RESULTS));
    expect(result.header.get(DlqHeader.source)).toBe(durableNameFor('svc', RESULTS));
  });
});
