import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { Controller, Module, type INestMicroservice } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, EventPattern, MessagePattern, Payload } from '@nestjs/microservices';
import { z } from 'zod';
import { EventRegistry } from '@baton/contracts';
import {
  DlqHeader,
  JetStreamEventStore,
  batonStreamNames,
  batonTopology,
  connectNats,
  provision,
  reactor,
  type MessageOutcome,
  type NatsHandle,
} from '@baton/eventstore';
import { JetStreamContext } from './jetstream.context';
import { JetStreamExceptionFilter } from './jetstream.exception-filter';
import { JetStreamServer } from './jetstream.server';

/*
 * Bytes that are not UTF-8 are refused as `invalid_utf8` wherever the transport decodes them — an
 * inbox message, a stored event handed to a reactor table, a core request — and recorded as a dead
 * letter with that reason. Before, the transport decoded them with U+FFFD in place of each bad
 * byte: a JSON string holding one parsed and reached the handler as text nobody sent, and any
 * other case was called `malformed_json`.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** `{"id":"a<0xFF>b"}`: JSON once the bad byte is replaced, but not UTF-8. */
const BAD_IN_STRING = new Uint8Array([...new TextEncoder().encode('{"id":"a'), 0xff, ...new TextEncoder().encode('b"}')]);
/** `{"id":<0xC0 0xAF>}`: an overlong form outside a string. */
const BAD_OUTSIDE_STRING = new Uint8Array([...new TextEncoder().encode('{"id":'), 0xc0, 0xaf, 0x7d]);

const seen: unknown[] = [];

const registry = () => new EventRegistry().register({ type: 'thing.done', aggregate: 'handoff', version: 1, schema: z.object({ n: z.number() }) });
type ThingEvent = { type: 'thing.done'; data: { n: number } };
const table = reactor<ThingEvent, number>({
  aggregate: 'handoff',
  decider: { initialState: () => 0, evolve: (s: number) => s + 1 },
  on: {
    'thing.done': (event) => {
      seen.push(event.payload);
      return Promise.resolve();
    },
  },
});

@Controller()
class Utf8ProbeController {
  @EventPattern('{prefix}.in.*.result.*', { dlqSource: 'svc-results' })
  onResult(@Payload() data: unknown): void {
    seen.push(data);
  }

  @EventPattern('{prefix}.ev.*.handoff.*', { dlqSource: 'svc-reactor' })
  onEvent(@Ctx() ctx: JetStreamContext): Promise<void> {
    return ctx.react(table);
  }

  @MessagePattern('{prefix}.cmd.router.*.publish_definition', { dlqSource: 'svc-requests' })
  onRequest(@Payload() data: unknown): { ok: true } {
    seen.push(data);
    return { ok: true };
  }
}

@Module({ controllers: [Utf8ProbeController] })
class Utf8ProbeModule {}

describe('invalid UTF-8 through the JetStream transport (real NATS): refused as invalid_utf8 and dead-lettered with that reason', () => {
  let prefix: string;
  let nats: NatsHandle;
  let app: INestMicroservice | null = null;
  let outcomes: MessageOutcome[];

  beforeEach(async () => {
    seen.length = 0;
    outcomes = [];
    prefix = `t${randomBytes(5).toString('hex')}`;
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
    const store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: registry(), cacheSize: 10 });
    const server = new JetStreamServer({
      name: 'svc',
      prefix,
      connection: nats,
      consumer: { pullExpiresMs: 1000, backoffMs: [200], maxDeliver: 2 },
      onOutcome: (o) => outcomes.push(o),
      events: { registry: registry(), store },
    });
    app = await NestFactory.createMicroservice(Utf8ProbeModule, { strategy: server, logger: false });
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

  async function until(check: () => boolean, what: string, timeoutMs = 6000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!check()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(20);
    }
  }

  const letters = async (source: string) => {
    const dlq = batonStreamNames(prefix).dlq;
    const info = await nats.jsm.streams.info(dlq);
    const out = [];
    for (let seq = info.state.first_seq; info.state.messages > 0 && seq <= info.state.last_seq; seq++) {
      const msg = await nats.jsm.streams.getMessage(dlq, { seq });
      if (msg.subject === `${prefix}.dlq.${source}`) out.push(msg);
    }
    return out;
  };

  it('an inbox message whose bytes are not UTF-8 — inside a JSON string or outside one — is dead-lettered invalid_utf8 with its bytes; the handler never sees it', async () => {
    await nats.js.publish(`${prefix}.in.p.result.a`, BAD_IN_STRING);
    await nats.js.publish(`${prefix}.in.p.result.a`, BAD_OUTSIDE_STRING);
    await nats.js.publish(`${prefix}.in.p.result.a`, new TextEncoder().encode('{"id":"café"}'));
    await until(() => outcomes.length === 3, 'three outcomes');
    expect(outcomes.map((o) => (o.kind === 'dead_lettered' ? o.reason : o.kind))).toEqual(['invalid_utf8', 'invalid_utf8', 'acked']);
    expect(seen).toEqual([{ id: 'café' }]);
    const stored = await letters('svc-results');
    expect(stored.map((l) => l.header.get(DlqHeader.reason))).toEqual(['invalid_utf8', 'invalid_utf8']);
    expect(stored.map((l) => Buffer.from(l.data))).toEqual([Buffer.from(BAD_IN_STRING), Buffer.from(BAD_OUTSIDE_STRING)]);
    expect(stored[0]!.header.get(DlqHeader.detail)).toContain('not UTF-8');
    expect(stored[0]!.header.get(DlqHeader.detail)).toContain('offset 8');
  });

  it('a stored event whose bytes are not UTF-8 never reaches the reactor table: dead-lettered invalid_utf8', async () => {
    await nats.js.publish(`${prefix}.ev.p.handoff.h1`, BAD_IN_STRING);
    await until(() => outcomes.length === 1, 'one outcome');
    expect(outcomes[0]).toMatchObject({ kind: 'dead_lettered', reason: 'invalid_utf8' });
    expect(seen).toEqual([]);
    expect((await letters('svc-reactor')).map((l) => l.header.get(DlqHeader.reason))).toEqual(['invalid_utf8']);
  });

  it('a core request whose bytes are not UTF-8 is answered invalid_utf8 and, for a pattern that names a source, dead-lettered with that reason', async () => {
    const reply = await nats.connection.request(`${prefix}.cmd.router.p.publish_definition`, BAD_IN_STRING, { timeout: 5000 });
    expect(JSON.parse(new TextDecoder().decode(reply.data))).toEqual({
      ok: false,
      error: { code: 'invalid_utf8', kind: 'rejection', message: expect.any(String), issues: [] },
    });
    expect(reply.headers?.get('Baton-Status')).toBe('error');
    expect(seen).toEqual([]);
    const stored = await letters('svc-requests');
    expect(
      stored.map((l) => [l.header.get(DlqHeader.reason), l.header.get(DlqHeader.stream), l.header.get(DlqHeader.subject), l.header.get(DlqHeader.consumer)]),
    ).toEqual([['invalid_utf8', 'core', `${prefix}.cmd.router.p.publish_definition`, 'svc']]);
    expect(Buffer.from(stored[0]!.data)).toEqual(Buffer.from(BAD_IN_STRING));
  });
});
