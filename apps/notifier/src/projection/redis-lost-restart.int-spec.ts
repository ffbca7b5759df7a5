import { randomBytes } from 'node:crypto';
import { MsgIds, Subjects, createEventRegistry } from '@baton/contracts';
import { batonStreamNames, connectNats, eventHeaders, headersFrom, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import {
  PROJECTION_DURABLE,
  batonProjections,
  createProjectionStore,
  createRedis,
  foldScenario,
  scenarioEnvelope,
  scenarioSteps,
  type RedisHandle,
} from '@baton/projections';
import { startNotifier } from '../main';
import { startPrivateServer, type PrivateServer } from '../api/private-server.int-support';
import { projectionPrefix } from './tokens';

/*
 * Redis loses its data while no notifier runs, events are stored meanwhile, and a notifier starts on
 * the empty Redis: it rebuilds `notices` only to the projection consumer's ack floor (what the
 * notifiers had published), so the notices of the events stored while it was down are published —
 * each once — and none of the history's again. Before, a notifier starting on an empty Redis
 * rebuilt `notices` to the stream's end (it could not tell a loss from a new Redis) and those
 * notices were never sent.
 */

const NOTICE_EVENTS = new Set(['run.notice_emitted', 'mesh.notice_emitted']);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const encoder = new TextEncoder();
const decoder = new TextDecoder();

describe('a notifier starting on a Redis that lost its data while it was down (private redis-server, real NATS)', () => {
  const prefix = `rr${randomBytes(5).toString('hex')}`;
  const registry = createEventRegistry();
  const template = foldScenario(scenarioSteps({ project: 'zzz' }));
  const noticesPerProject = template.filter((e) => NOTICE_EVENTS.has(e.event.type)).length;
  let server: PrivateServer;
  let redis: RedisHandle;
  let nats: NatsHandle;
  let service: RunningService | null = null;
  const seen = new Map<string, number>();
  const logLines: string[] = [];
  let writeSpy: jest.SpyInstance;

  const start = () =>
    startNotifier({
      ...process.env,
      BATON_PREFIX: prefix,
      HTTP_PORT: '0',
      LOG_LEVEL: 'info',
      REDIS_URL: server.url,
      NOTIFIER_PROJECTION_CHECK_MS: '0',
    });

  beforeAll(async () => {
    server = await startPrivateServer('redis-server');
    redis = createRedis(server.url);
    nats = await connectNats({ servers: process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222', reconnect: false });
    nats.connection.subscribe(`${prefix}.notice.>`, {
      callback: (_err, msg) => {
        const notice = JSON.parse(decoder.decode(msg.data)) as { project: string; notice_id: string };
        const key = `${notice.project} ${notice.notice_id}`;
        seen.set(key, (seen.get(key) ?? 0) + 1);
      },
    });
    await nats.connection.flush();
    const write = process.stdout.write.bind(process.stdout);
    writeSpy = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array, ...rest: unknown[]) => {
      const text = typeof chunk === 'string' ? chunk : decoder.decode(chunk);
      if (text.includes('"service":"notifier"')) {
        logLines.push(...text.split('\n').filter(Boolean));
        return true;
      }
      return (write as (chunk: string | Uint8Array, ...rest: unknown[]) => boolean)(chunk, ...rest);
    });
  }, 60_000);

  afterAll(async () => {
    await service?.stop().catch(() => undefined);
    writeSpy?.mockRestore();
    await redis?.close().catch(() => undefined);
    await server?.remove();
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await nats?.jsm.streams.delete(name).catch(() => undefined);
    await nats?.drain().catch(() => undefined);
  }, 30_000);

  /** Store the scenario once in project `p<n>`, as the event store stores it. */
  async function publishProject(n: number): Promise<void> {
    const project = `p${n}`;
    for (const [index, e] of template.entries()) {
      const stored = scenarioEnvelope(registry, e, `ev-${n}-${index}`, project);
      const envelope = { ...stored, payload: JSON.parse(JSON.stringify(stored.payload).split('"zzz"').join(`"${project}"`)) as unknown };
      await nats.js.publish(Subjects.aggregate(prefix, project, e.aggregate, e.id), encoder.encode(JSON.stringify(envelope)), {
        msgID: MsgIds.event(project, e.aggregate, e.id, envelope.id),
        headers: headersFrom(eventHeaders(registry, envelope.type, envelope.version)),
      });
    }
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

  it('publishes the notices of the events stored while it was down, each once, and none of those it had published', async () => {
    expect(noticesPerProject).toBeGreaterThan(0);
    service = await start();
    for (let n = 0; n < 3; n++) await publishProject(n);
    await caughtUp(30_000);
    await nats.connection.flush();
    await sleep(300);
    expect(seen.size).toBe(3 * noticesPerProject);
    const floorBefore = (await nats.jsm.streams.info(batonStreamNames(prefix).events)).state.last_seq;
    // Every applied event acknowledged (the acks follow the commits): the loss window under test is
    // the notifier's absence, not acks in flight at its stop.
    for (let tries = 0; (await nats.jsm.consumers.info(batonStreamNames(prefix).events, PROJECTION_DURABLE)).ack_floor.stream_seq < floorBefore; tries++) {
      if (tries > 100) throw new Error('the projection consumer never acknowledged the stream');
      await sleep(100);
    }

    await service.stop();
    service = null;
    // Stored while no notifier runs; then Redis loses everything.
    for (let n = 3; n < 6; n++) await publishProject(n);
    await redis.client.flushdb();

    logLines.length = 0;
    service = await start();
    await caughtUp(30_000);
    await nats.connection.flush();
    await sleep(500);

    expect([...seen].filter(([, count]) => count > 1)).toEqual([]);
    // Nothing acknowledged is lost: every notice in the stream was published, once.
    expect(seen.size).toBe(6 * noticesPerProject);

    const rebuilt = logLines
      .map((line) => JSON.parse(line) as { msg: string; projection?: string; last_seq?: number; notices_from_seq?: number })
      .filter((line) => line.msg === 'projection rebuilt at start');
    expect(rebuilt.map((line) => line.projection).sort()).toEqual(
      batonProjections()
        .map((p) => p.name)
        .sort(),
    );
    const notices = rebuilt.find((line) => line.projection === 'notices');
    expect(notices).toEqual(expect.objectContaining({ last_seq: floorBefore, notices_from_seq: floorBefore + 1 }));
  }, 90_000);
});
