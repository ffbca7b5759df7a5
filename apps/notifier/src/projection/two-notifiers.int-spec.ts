import { randomBytes } from 'node:crypto';
import { MsgIds, Subjects, createEventRegistry } from '@baton/contracts';
import { batonStreamNames, connectNats, eventHeaders, headersFrom, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { batonProjections, createProjectionStore, createRedis, foldScenario, scenarioEnvelope, scenarioSteps, type RedisHandle } from '@baton/projections';
import { startNotifier } from '../main';
import { projectionPrefix } from './tokens';

/*
 * Two notifier instances share the projection consumer (the documented way to scale it,
 * infra/scale): each human action notice is published once. They split the deliveries and each
 * applies a range from where the projections stand, reading the other's sequences from the stream,
 * so their ranges overlap; a range's notices are published before its commit, so before the apply
 * lock both instances published the overlap's notices — and a loser re-folding, again (an SRE
 * audit counted 167 messages for 100 notices).
 */

const NOTICE_EVENTS = new Set(['run.notice_emitted', 'mesh.notice_emitted']);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const encoder = new TextEncoder();
const decoder = new TextDecoder();

describe('two notifier instances on one projection consumer (real NATS and Redis)', () => {
  const prefix = `tn${randomBytes(5).toString('hex')}`;
  const registry = createEventRegistry();
  const template = foldScenario(scenarioSteps({ project: 'zzz' }));
  const noticesPerProject = template.filter((e) => NOTICE_EVENTS.has(e.event.type)).length;
  const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
  let redis: RedisHandle;
  let nats: NatsHandle;
  const services: RunningService[] = [];
  const seen = new Map<string, number>();
  let writeSpy: jest.SpyInstance;

  beforeAll(async () => {
    redis = createRedis(redisUrl);
    nats = await connectNats({ servers: process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222', reconnect: false });
    nats.connection.subscribe(`${prefix}.notice.>`, {
      callback: (_err, msg) => {
        const notice = JSON.parse(decoder.decode(msg.data)) as { project: string; notice_id: string };
        const key = `${notice.project} ${notice.notice_id}`;
        seen.set(key, (seen.get(key) ?? 0) + 1);
      },
    });
    await nats.connection.flush();
    // The two services' log lines are not this test's subject.
    const write = process.stdout.write.bind(process.stdout);
    writeSpy = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array, ...rest: unknown[]) => {
      const text = typeof chunk === 'string' ? chunk : decoder.decode(chunk);
      if (text.includes('"service":"notifier"')) return true;
      return (write as (chunk: string | Uint8Array, ...rest: unknown[]) => boolean)(chunk, ...rest);
    });
    for (let i = 0; i < Number(process.env['TN_INSTANCES'] ?? 2); i++)
      services.push(
        await startNotifier({
          ...process.env,
          BATON_PREFIX: prefix,
          BATON_INSTANCE: `notifier-${i}`,
          HTTP_PORT: '0',
          REDIS_URL: redisUrl,
          NOTIFIER_PROJECTION_CHECK_MS: '0',
        }),
      );
  }, 60_000);

  afterAll(async () => {
    for (const service of services) await service.stop().catch(() => undefined);
    writeSpy?.mockRestore();
    for await (const batch of redis.client.scanStream({ match: `${prefix}:*`, count: 1000 })) {
      const keys = batch as string[];
      if (keys.length > 0) await redis.client.unlink(...keys);
    }
    await redis?.close().catch(() => undefined);
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await nats?.jsm.streams.delete(name).catch(() => undefined);
    await nats?.drain().catch(() => undefined);
  }, 30_000);

  /** Store the scenario once in project `p<n>`, as the event store stores it. */
  async function publishProject(n: number): Promise<void> {
    const project = `p${n}`;
    const acks: Promise<unknown>[] = [];
    for (const [index, e] of template.entries()) {
      const stored = scenarioEnvelope(registry, e, `ev-${n}-${index}`, project);
      const envelope = { ...stored, payload: JSON.parse(JSON.stringify(stored.payload).split('"zzz"').join(`"${project}"`)) as unknown };
      acks.push(
        nats.js.publish(Subjects.aggregate(prefix, project, e.aggregate, e.id), encoder.encode(JSON.stringify(envelope)), {
          msgID: MsgIds.event(project, e.aggregate, e.id, envelope.id),
          headers: headersFrom(eventHeaders(registry, envelope.type, envelope.version)),
        }),
      );
    }
    await Promise.all(acks);
  }

  async function caughtUp(timeoutMs: number): Promise<void> {
    const store = createProjectionStore({ redis: redis.client, prefix: projectionPrefix(prefix) });
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const last = (await nats.jsm.streams.info(batonStreamNames(prefix).events)).state.last_seq;
      const statuses = await Promise.all(batonProjections().map((p) => store.status(p)));
      if (statuses.every((s) => s.activeGeneration !== null && s.lastSeq === last)) return;
      if (Date.now() > deadline) throw new Error(`projections at ${statuses.map((s) => s.lastSeq).join(',')}, stream at ${last}`);
      await sleep(100);
    }
  }

  it('publishes each notice once while both apply overlapping ranges', async () => {
    expect(noticesPerProject).toBeGreaterThan(0);
    const projects = 40;
    // Bursts of projects at once, so both instances hold deliveries of the same stretch of the stream.
    for (let n = 0; n < projects; n += 8) await Promise.all(Array.from({ length: 8 }, (_, i) => publishProject(n + i)));
    await caughtUp(60_000);
    await nats.connection.flush();
    await sleep(500);
    expect([...seen].filter(([, count]) => count > 1)).toEqual([]);
    // Nothing acknowledged is lost: every notice in the stream was published.
    expect(seen.size).toBe(projects * noticesPerProject);
  }, 120_000);
});
