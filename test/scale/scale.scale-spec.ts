import { randomBytes } from 'node:crypto';
import { createEventRegistry, Subjects, type EventEnvelope, type HandoffEvent } from '@baton/contracts';
import { evolveHandoff, initialHandoffState, type HandoffState } from '@baton/domain';
import { batonStreamNames, connectNats, type NatsHandle } from '@baton/eventstore';
import { MetricName, metricSamples } from '@baton/platform';
import {
  FoldSession,
  batonProjections,
  createProjectionStore,
  createRedis,
  diffSnapshots,
  jetStreamReplaySource,
  type RedisHandle,
  type SequencedEvent,
} from '@baton/projections';
import {
  AgentClaims,
  cleanupDeployment,
  cycleResult,
  freePort,
  onOffers,
  publishAgentResult,
  publishCycleDefinition,
  startCycleRun,
  startPlatform,
  startService,
  stopService,
  waitQuiet,
  waitReady,
  type ServiceProcess,
} from '@baton/testing';

const natsUrl = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Runs driven at once, and results each run takes before its agent terminates it. */
const RUNS = 24;
const RESULTS_PER_RUN = 12;

/** Events of the command a result caused: every run event the router appended for it carries the result id as causation. */
const OUTCOMES = new Set(['run.routed', 'run.held', 'run.stopped', 'run.completed', 'run.terminated']);

/**
 * Scale-out: every service runs as two processes on one deployment (one stream set, one Redis
 * key space), coordinated by nothing but JetStream (shared durable consumers, queue groups,
 * optimistic concurrency on aggregates) and Redis (compare-and-set projection commits). Simulated
 * agents drive many runs at once through the real doors (offers in, results out) while one router
 * and one notifier are replaced mid-way. Then the streams are folded and checked.
 */
describe('scale-out: two processes of every service share one deployment', () => {
  const prefix = `scale${randomBytes(4).toString('hex')}`;
  const project = 'scale';
  const env = { NATS_URL: natsUrl, REDIS_URL: redisUrl, BATON_PREFIX: prefix, LOG_LEVEL: 'warn', WATCHDOG_TICK_MS: '200' };
  let services: ServiceProcess[] = [];
  let nats: NatsHandle;
  let redis: RedisHandle;

  beforeAll(async () => {
    nats = await connectNats({ servers: natsUrl, reconnect: false });
    redis = createRedis(redisUrl);
    services = await startPlatform(env, { instances: 2 });
    await publishCycleDefinition(nats, prefix, project);
  }, 120_000);

  afterAll(async () => {
    const codes = await Promise.all(services.map((service) => stopService(service)));
    await cleanupDeployment(nats, redis.client, prefix);
    await redis.close();
    await nats.close();
    // Graceful shutdown on SIGTERM exits 0, for every instance.
    expect(codes.every((code) => code === 0)).toBe(true);
  }, 120_000);

  it('under load, with a router and a notifier replaced mid-way: every result has exactly one outcome, every handoff a legal history with no event twice, and the projections equal a rebuild from the stream', async () => {
    const published = new Map<string, string>(); // result id → run id
    const seenHandoffs = new Set<string>();
    const resultsOf = new Map<string, number>();
    let replaced = false;
    const terminated = new Set<string>();
    const runSub = nats.connection.subscribe(Subjects.aggregate(prefix, project, 'run', '*'), {
      callback: (err, msg) => {
        if (err) return;
        const envelope = JSON.parse(new TextDecoder().decode(msg.data)) as { type: string; aggregate: { id: string } };
        if (envelope.type === 'run.terminated') terminated.add(envelope.aggregate.id);
      },
    });
    // The agents: each offer of a run is claimed and answered with the next result under that
    // claim (the last one terminates).
    const agents = new AgentClaims(nats, prefix, project);
    const claimFailures: string[] = [];
    const stopOffers = onOffers(nats, prefix, project, (offer) => {
      if (seenHandoffs.has(offer.handoffId)) return; // a duplicate offer publish
      seenHandoffs.add(offer.handoffId);
      const n = (resultsOf.get(offer.runId) ?? 0) + 1;
      resultsOf.set(offer.runId, n);
      void agents.claim(offer.agent, offer.handoffId, 60_000).then(
        (claimId) => {
          const result = cycleResult(project, offer.runId, offer.agent, n, { handoffId: offer.handoffId, claimId }, n === RESULTS_PER_RUN);
          published.set(String(result['result_id']), offer.runId);
          return publishAgentResult(nats, prefix, result);
        },
        (error: unknown) => claimFailures.push(String(error)),
      );
    });

    // How many messages of `consumer` an instance acknowledged (from its /metrics; -1 when not served).
    const handled = async (service: ServiceProcess, consumer: RegExp): Promise<number> => {
      const response = await fetch(`http://127.0.0.1:${service.port}/metrics`);
      if (!response.ok) return -1;
      return metricSamples(await response.text(), MetricName.eventsHandled, { consumer, outcome: 'acked' }).reduce((sum, n) => sum + n, 0);
    };
    const consumers = {
      router: /^router__prefix__in_any_result_any/,
      ledger: /^ledger_handoff_reactor$/,
      notifier: /^notifier_projections$/,
    } as const;
    const workedBeforeStop = new Map<string, number>();

    const tag = Date.now().toString(36);
    const runIds = Array.from({ length: RUNS }, (_, i) => `sc-${tag}-${i}`);
    for (const runId of runIds) await startCycleRun(nats, prefix, project, runId, 'scale-test');

    const deadline = Date.now() + 180_000;
    while (terminated.size < RUNS && Date.now() < deadline) {
      if (!replaced && published.size >= (RUNS * RESULTS_PER_RUN) / 3) {
        replaced = true;
        // Replace one router and one notifier while results flow: their durable consumers are shared.
        for (const name of ['router', 'notifier'] as const) {
          const old = services.find((s) => s.instance === `${name}-2`) as ServiceProcess;
          workedBeforeStop.set(old.instance, await handled(old, consumers[name]));
          expect(await stopService(old)).toBe(0);
          const fresh = startService(name, await freePort(), env, { instance: `${name}-3` });
          services = [...services.filter((s) => s !== old), fresh];
          await waitReady(fresh, 60_000);
        }
      }
      await sleep(100);
    }
    stopOffers();
    runSub.unsubscribe();
    await agents.close();
    expect(claimFailures).toEqual([]);
    expect(replaced).toBe(true);
    expect(terminated.size).toBe(RUNS);
    expect(await waitQuiet(nats, prefix, 120_000, { rounds: 3 })).toBe(true);

    // Fold the whole events stream.
    const source = jetStreamReplaySource({ nats, prefix, registry: createEventRegistry() });
    const events: SequencedEvent[] = [];
    for await (const event of source(1)) events.push(event);
    const ids = events.map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length); // no event stored twice

    // Runs: each published result recorded once, with exactly one routing outcome; nothing refused.
    const runEvents = events.filter((e) => e.aggregate.kind === 'run');
    expect(runEvents.filter((e) => e.type === 'run.result_rejected')).toEqual([]);
    const recorded = new Map<string, number>();
    const outcomes = new Map<string, number>();
    for (const event of runEvents) {
      if (event.type === 'run.result_recorded') {
        const id = (event.payload as { result_id: string }).result_id;
        recorded.set(id, (recorded.get(id) ?? 0) + 1);
      }
      if (OUTCOMES.has(event.type) && event.causationId !== null && published.has(event.causationId)) {
        outcomes.set(event.causationId, (outcomes.get(event.causationId) ?? 0) + 1);
      }
    }
    expect(published.size).toBe(RUNS * RESULTS_PER_RUN);
    const wrongRecords = [...published.keys()].filter((id) => recorded.get(id) !== 1);
    const wrongOutcomes = [...published.keys()].filter((id) => outcomes.get(id) !== 1);
    expect({ wrongRecords, wrongOutcomes }).toEqual({ wrongRecords: [], wrongOutcomes: [] });

    // Handoffs: one per route, created first, every later event a transition the fold accepts.
    const routedHandoffs = runEvents.filter((e) => e.type === 'run.routed').map((e) => (e.payload as { handoff_id: string }).handoff_id);
    const byHandoff = new Map<string, EventEnvelope[]>();
    for (const event of events.filter((e) => e.aggregate.kind === 'handoff')) {
      byHandoff.set(event.aggregate.id, [...(byHandoff.get(event.aggregate.id) ?? []), event]);
    }
    expect([...byHandoff.keys()].sort()).toEqual([...new Set(routedHandoffs)].sort());
    expect(routedHandoffs.length).toBe(new Set(routedHandoffs).size);
    const illegal: string[] = [];
    for (const [id, history] of byHandoff) {
      let state: HandoffState = initialHandoffState();
      history.forEach((event, index) => {
        const next = evolveHandoff(state, { type: event.type, data: event.payload } as HandoffEvent);
        if (next === state || (index === 0) !== (event.type === 'handoff.created')) illegal.push(`${id}#${index} ${event.type}`);
        state = next;
      });
    }
    expect(illegal).toEqual([]);
    // Every handoff but each run's last was closed by exactly one result.
    const completed = [...byHandoff.values()].filter((history) => history.some((e) => e.type === 'handoff.completed_by_result')).length;
    expect(completed).toBe(RUNS * RESULTS_PER_RUN);

    // Projections (applied by two notifiers sharing one consumer): caught up, and equal to a rebuild.
    const lastSeq = (await nats.jsm.streams.info(batonStreamNames(prefix).events)).state.last_seq;
    const store = createProjectionStore({ redis: redis.client, prefix: `${prefix}:proj` });
    for (const projection of batonProjections()) {
      const live = await store.snapshot(projection.name);
      expect({ projection: projection.name, lastSeq: live.lastSeq }).toEqual({ projection: projection.name, lastSeq });
      const session = new FoldSession(projection, 'rebuild', null);
      const generation = await store.allocateGeneration(projection.name);
      try {
        await store.applyBatch(session.definition, source(1), { generation });
        const rebuilt = await store.snapshot(projection.name, generation);
        expect({ projection: projection.name, differences: diffSnapshots(live, rebuilt) }).toEqual({ projection: projection.name, differences: [] });
      } finally {
        await store.dropGeneration(projection.name, generation).catch(() => undefined);
      }
    }

    // The work was shared: at least two instances of each service handled messages of its consumer.
    for (const name of ['router', 'ledger', 'notifier'] as const) {
      const running = services.filter((service) => service.name === name && service.child.exitCode === null);
      const counts = [
        ...(await Promise.all(running.map((service) => handled(service, consumers[name])))),
        ...[...workedBeforeStop].filter(([instance]) => instance.startsWith(`${name}-`)).map(([, count]) => count),
      ];
      if (counts.some((count) => count < 0)) continue; // metrics not served: nothing to show
      expect({ service: name, instancesThatWorked: Math.min(2, counts.filter((count) => count > 0).length) }).toEqual({
        service: name,
        instancesThatWorked: 2,
      });
    }
  });
});
