import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { Controller, Module } from '@nestjs/common';
import { EventPattern, Payload } from '@nestjs/microservices';
import { batonStreamNames, connectNats, type NatsHandle } from '@baton/eventstore';
import { AckPolicy, type ConsumerInfo } from 'nats';
import { runService, type RunningService } from './bootstrap';

/*
 * BATON_ACK_WAIT_MS against the real NATS: the services' durables take it (and an existing durable
 * is brought to it at the next start), and a message a process took and never acknowledged — the
 * process killed — comes back to the service after that wait, not after the server's 30 s.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const encoder = new TextEncoder();

const handled = new Map<string, number>();

@Controller()
class ProbeController {
  @EventPattern('{prefix}.in.*.result.*')
  onResult(@Payload() data: { id: string }): void {
    handled.set(data.id, Date.now());
  }
}

@Module({ controllers: [ProbeController] })
class ProbeModule {}

describe('BATON_ACK_WAIT_MS: the ack wait of the services’ durables (runService, real NATS)', () => {
  const prefix = `aw${randomBytes(5).toString('hex')}`;
  const inbox = batonStreamNames(prefix).inbox;
  let nats: NatsHandle;
  let service: RunningService | null = null;

  const start = async (ackWaitMs?: string) => {
    service = await runService({
      service: 'probe',
      defaultPort: 0,
      imports: [ProbeModule],
      redis: false,
      env: { NATS_URL, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: 'error', ...(ackWaitMs !== undefined ? { BATON_ACK_WAIT_MS: ackWaitMs } : {}) },
    });
  };
  const stop = async () => {
    await service?.stop();
    service = null;
  };
  const probeDurable = async (): Promise<ConsumerInfo> => {
    const all = await nats.jsm.consumers.list(inbox).next();
    const found = all.find((c) => c.config.description?.startsWith('probe:') === true);
    if (found === undefined) throw new Error(`no probe durable on ${inbox}: ${all.map((c) => c.name).join(', ')}`);
    return found;
  };

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
  });

  afterAll(async () => {
    await stop();
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
    await nats.drain();
  });

  it('a durable takes the default (10 s), and a start with another value updates the existing durable in place', async () => {
    await start();
    const first = await probeDurable();
    expect(first.config.ack_wait).toBe(10_000 * 1_000_000);
    expect(first.config.ack_policy).toBe(AckPolicy.Explicit);
    await stop();

    await start('1500');
    const second = await probeDurable();
    expect(second.name).toBe(first.name); // the same durable, not a new one reading the stream again
    expect(second.config.ack_wait).toBe(1_500 * 1_000_000);
    await stop();
  });

  it('a message a killed process took comes back after the configured wait', async () => {
    // The durable exists with 1.5 s (previous test). A process takes the next message and dies
    // without acknowledging it: a pull of one message by a client that then disappears.
    const { name } = await probeDurable();
    await nats.js.publish(`${prefix}.in.demo.result.coder`, encoder.encode(JSON.stringify({ id: 'taken' })), { msgID: 'taken' });
    const victim = await connectNats({ servers: NATS_URL, reconnect: false });
    const consumer = await victim.js.consumers.get(inbox, name);
    const taken = await consumer.next({ expires: 5_000 });
    expect(taken?.redelivered).toBe(false);
    const takenAt = Date.now();
    await victim.close(); // never acked

    await start('1500');
    for (let i = 0; i < 200 && !handled.has('taken'); i++) await sleep(50);
    const at = handled.get('taken');
    expect(at).toBeDefined();
    // Not before the wait ran out (the message was held), well before the 30 s a server default would hold it.
    expect(at! - takenAt).toBeGreaterThanOrEqual(1_400);
    expect(at! - takenAt).toBeLessThan(9_000);
    let info = await probeDurable();
    for (let i = 0; i < 40 && info.num_ack_pending > 0; i++) info = await sleep(50).then(probeDurable);
    expect(info.num_ack_pending).toBe(0);
  });
});
