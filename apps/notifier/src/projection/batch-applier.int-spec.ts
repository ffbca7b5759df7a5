import { randomBytes } from 'node:crypto';
import { createEventRegistry } from '@baton/contracts';
import { connectNats, PoisonError, type ConsumedMessage, type NatsHandle } from '@baton/eventstore';
import {
  createBatonProjector,
  createProjectionStore,
  createRedis,
  scenarioLog,
  type BatonProjector,
  type EventRange,
  type RedisHandle,
} from '@baton/projections';
import { ProjectionBatchApplier, type BatchApplierOptions } from './batch-applier';

/*
 * When the projections keep failing to apply one event, the notifier's applier decides when to
 * give up on it — by its own count of failures, not by the message's deliveries (which waiting
 * behind another failing event inflates), and never for Redis or NATS not answering. Real Redis
 * (a key prefix of the test's own) under the real projector; the failures are injected into its
 * `applyRange` for one sequence.
 */
const log = scenarioLog();
const encoder = new TextEncoder();
const silent = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined, child: () => silent } as never;

let nats: NatsHandle;
let redis: RedisHandle;
let prefix: string;

beforeAll(async () => {
  nats = await connectNats({ servers: process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222', reconnect: false });
  redis = createRedis();
});

afterAll(async () => {
  await nats?.close();
  await redis?.close();
});

afterEach(async () => {
  const keys = await redis.client.keys(`${prefix}:*`);
  if (keys.length > 0) await redis.client.del(...keys);
});

/** The messages of `seqs` as the consumer hands them over, each delivered `deliveries` times. */
function messages(seqs: number[], deliveries: number): ConsumedMessage[] {
  return seqs.map((seq) => {
    const event = log[seq - 1]!;
    const { seq: _seq, ...envelope } = event;
    return {
      subject: `x.ev.${event.project}.${event.aggregate.kind}.${event.aggregate.id}`,
      data: encoder.encode(JSON.stringify(envelope)),
      headers: {},
      seq,
      deliveryCount: deliveries,
      stream: 'X_EVENTS',
      consumer: 'notifier-projections',
      pending: 0,
      timestampMs: Date.now(),
      raw: {} as never,
    };
  });
}

/** An applier over a fresh projection keyspace whose projector fails `failing` until `failures()` says stop. */
function applierFailing(failingSeq: number, error: () => Error): { applier: ProjectionBatchApplier; projector: BatonProjector; failures: { left: number } } {
  prefix = `tba${randomBytes(4).toString('hex')}`;
  const real = createBatonProjector({ store: createProjectionStore({ redis: redis.client, prefix: `${prefix}:proj` }) });
  const failures = { left: Number.POSITIVE_INFINITY };
  const projector = new Proxy(real, {
    get(target, key, receiver) {
      if (key !== 'applyRange') return Reflect.get(target, key, receiver);
      return async (range: EventRange, options: Parameters<BatonProjector['applyRange']>[1]) => {
        if (failures.left > 0 && range.events.some((event) => event.seq === failingSeq)) {
          failures.left--;
          throw error();
        }
        return target.applyRange(range, options);
      };
    },
  });
  return { applier: applierOver(projector), projector: real, failures };
}

/** A batch applier over `projector` on the fake stream `X_EVENTS` (maxDeliver 3), publishing notices with `publishNotices`. */
function applierOver(projector: BatonProjector, publishNotices: BatchApplierOptions['publishNotices'] = async () => undefined): ProjectionBatchApplier {
  return new ProjectionBatchApplier({
    projector,
    registry: createEventRegistry(),
    nats,
    stream: 'X_EVENTS',
    prefix: 'x',
    maxDeliver: 3,
    publishNotices,
    onApplied: () => undefined,
    logger: silent,
  });
}

const lastSeqs = async (projector: BatonProjector) => (await projector.status()).map((status) => status.lastSeq);

describe('the projection applier gives up on an event by its own count of failures, never for an outage', () => {
  it('a message whose deliveries waiting inflated is not skipped at its first failure of its own: it waits, then is applied', async () => {
    const { applier, projector, failures } = applierFailing(2, () => new Error('script failed once'));
    failures.left = 2; // the range's apply, then the event's own in isolation
    const first = await applier.handle(messages([1, 2, 3], 9));
    expect([...first.values()].map((verdict) => verdict.kind)).toEqual(['later', 'later']);
    expect(await lastSeqs(projector)).toEqual([1, 1, 1, 1, 1]);
    const second = await applier.handle(messages([2, 3], 10));
    expect(second.size).toBe(0);
    expect(await lastSeqs(projector)).toEqual([3, 3, 3, 3, 3]);
  });

  it('Redis not answering is never a reason to skip, however long it lasts', async () => {
    const unavailable = () => Object.assign(new Error('redis did not answer'), { name: 'RedisUnavailableError' });
    const { applier, projector } = applierFailing(1, unavailable);
    for (let attempt = 1; attempt <= 6; attempt++) {
      const verdicts = await applier.handle(messages([1], attempt));
      expect([...verdicts.values()]).toEqual([{ kind: 'later', delayMs: expect.any(Number) }]);
    }
    expect(await lastSeqs(projector)).toEqual([0, 0, 0, 0, 0]);
  });

  it('an event that keeps failing for its own reasons is skipped after maxDeliver failures here, dead-lettered projection_failed, and the rest applied', async () => {
    const { applier, projector } = applierFailing(2, () => new Error('cannot fold it'));
    const first = await applier.handle(messages([1, 2, 3], 1));
    expect([...first.values()].map((verdict) => verdict.kind)).toEqual(['later', 'later']);
    const second = await applier.handle(messages([2, 3], 2));
    expect([...second.values()].map((verdict) => verdict.kind)).toEqual(['later', 'later']);
    expect(await lastSeqs(projector)).toEqual([1, 1, 1, 1, 1]);
    const third = await applier.handle(messages([2, 3], 3));
    const [skipped, ...rest] = [...third.entries()];
    expect(rest).toEqual([]);
    expect(skipped![0].seq).toBe(2);
    expect(skipped![1]).toEqual({ kind: 'failed', error: expect.any(PoisonError) });
    expect((skipped![1] as { error: PoisonError }).error.reason).toBe('projection_failed');
    expect(await lastSeqs(projector)).toEqual([3, 3, 3, 3, 3]);
  });
});

describe("a range's notices are published once by an applier", () => {
  it('when its notices commit is refused after the publish (a swap moved the generation) and retried, the notice is not published again', async () => {
    prefix = `tba${randomBytes(4).toString('hex')}`;
    const projector = createBatonProjector({ store: createProjectionStore({ redis: redis.client, prefix: `${prefix}:proj` }) });
    const notice = log.find((event) => event.type === 'run.notice_emitted')!;
    const published: string[] = [];
    let moveOnce = false;
    const applier = applierOver(projector, async (events) => {
      for (const event of events) if (event.type.endsWith('notice_emitted')) published.push(event.id);
      if (!moveOnce) return;
      moveOnce = false;
      // Between this publish and its commit, a rebuild's swap put in a generation one event
      // behind (a hand-over): the commit's compare-and-set is refused and the range folded again.
      const base = `${prefix}:proj:notices`;
      const generation = await redis.client.get(`${base}:active`);
      await redis.client.hset(`${base}:g${generation}:~meta`, 'seq', String(notice.seq - 2));
    });
    const before = Array.from({ length: notice.seq - 1 }, (_, i) => i + 1);
    expect((await applier.handle(messages(before, 1))).size).toBe(0);
    moveOnce = true;
    expect((await applier.handle(messages([notice.seq - 1, notice.seq, notice.seq + 1], 1))).size).toBe(0);
    expect(moveOnce).toBe(false);
    expect(published.filter((id) => id === notice.id)).toEqual([notice.id]);
    expect(await lastSeqs(projector)).toEqual(Array(5).fill(notice.seq + 1));
  });
});
