import { randomBytes } from 'node:crypto';
import { connectNats, type NatsHandle } from '@baton/eventstore';
// Test only: the private nats-servers every project's specs share (not part of @baton/eventstore's API).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startNatsCluster, type PrivateNatsCluster } from '../../../eventstore/src/int/servers';
import { runService, type RunningService } from '../service/bootstrap';
import { JetStreamProbe } from './jetstream-probe';

/*
 * Readiness says whether JetStream answers, not only whether NATS is connected: a cluster that
 * lost quorum keeps every client connected while no append can succeed. The probe behind it is
 * rate-limited (one account-info request per few seconds, however often readiness is asked).
 * Against the shared server, and against private nats-servers: a three-node cluster a service
 * runs on, two of its nodes then killed.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';

describe('JetStreamProbe (the shared NATS)', () => {
  let nats: NatsHandle;

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, name: 'jetstream-probe-int', reconnect: false });
  });

  afterAll(() => nats.close());

  it('answers whether JetStream answers, asking at most once per cacheMs and once at a time, however often it is asked', async () => {
    let now = 1_000_000;
    const probe = new JetStreamProbe(nats.connection, { cacheMs: 5000, now: () => now });
    expect(probe.last()).toBeNull();
    expect(await Promise.all(Array.from({ length: 20 }, () => probe.available()))).toEqual(Array.from({ length: 20 }, () => true));
    for (let i = 0; i < 50; i++) expect(await probe.available()).toBe(true);
    expect(probe.probes()).toBe(1);
    expect(probe.last()).toEqual({ ok: true, at: 1_000_000, why: null });
    now += 4999;
    await probe.available();
    expect(probe.probes()).toBe(1);
    now += 1;
    await probe.available();
    expect(probe.probes()).toBe(2);
  });

  it('a closed connection is not available, without a request', async () => {
    const own = await connectNats({ servers: NATS_URL, name: 'jetstream-probe-closed', reconnect: false });
    await own.close();
    const probe = new JetStreamProbe(own.connection);
    expect(await probe.available()).toBe(false);
    expect(probe.last()).toMatchObject({ ok: false, why: 'connection closed' });
  });
});

describe('/health/ready of a service on a three-node cluster that loses two nodes (private nats-servers)', () => {
  let cluster: PrivateNatsCluster | undefined;
  let service: RunningService | undefined;
  let base: string;

  const ready = async () => {
    const response = await fetch(`${base}/health/ready`);
    return { status: response.status, body: (await response.json()) as { status: string; checks: Record<string, boolean> } };
  };

  beforeAll(async () => {
    cluster = await startNatsCluster({ name: 'baton-ready-test' });
    service = await runService({
      service: 'readiness-probe',
      defaultPort: 0,
      imports: [],
      redis: false,
      env: {
        NATS_URL: cluster.natsUrl,
        BATON_PREFIX: `rd${randomBytes(4).toString('hex')}`,
        BATON_STREAM_REPLICAS: '3',
        BATON_NATS_AUTH: 'none',
        HTTP_PORT: '0',
        LOG_LEVEL: 'error',
      },
    });
    base = (await service.app.getUrl()).replace('[::1]', '127.0.0.1');
  }, 90_000);

  afterAll(async () => {
    await service?.stop().catch(() => undefined);
    await cluster?.remove();
  }, 60_000);

  it('is 200 with jetstream true while the cluster has quorum; 503 with nats true and jetstream false once two nodes are gone', async () => {
    expect(await ready()).toEqual({
      status: 200,
      body: { status: 'ready', checks: { nats: true, jetstream: true }, details: { storage: { full: false, conditions: [] } } },
    });
    await cluster!.nodes[1]!.kill();
    await cluster!.nodes[2]!.kill();
    // The service's connection stays up (on the node left, or back on it), while JetStream answers
    // nothing there, then "temporarily unavailable": no append can succeed.
    const deadline = Date.now() + 30_000;
    let last = await ready();
    while (!(last.status === 503 && last.body.checks['nats'] === true) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      last = await ready();
    }
    expect(last).toEqual({
      status: 503,
      body: { status: 'not_ready', checks: { nats: true, jetstream: false }, details: { storage: { full: false, conditions: [] } } },
    });
  }, 60_000);
});
