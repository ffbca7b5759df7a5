import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { connectNats, type NatsHandle } from '@baton/eventstore';
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

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function listening(port: number): Promise<void> {
  for (let i = 0; i < 300; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port });
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`nats-server did not listen on ${port}`);
}

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}

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
  const children: ChildProcess[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'baton-ready-cluster-'));
  let service: RunningService | undefined;
  let base: string;

  const ready = async () => {
    const response = await fetch(`${base}/health/ready`);
    return { status: response.status, body: (await response.json()) as { status: string; checks: Record<string, boolean> } };
  };

  beforeAll(async () => {
    const ports = [await freePort(), await freePort(), await freePort()];
    const routes = [await freePort(), await freePort(), await freePort()];
    for (let i = 0; i < 3; i++) {
      const args = ['-a', '127.0.0.1', '-p', String(ports[i]), '-js', '-sd', join(dir, `n${i + 1}`), '-server_name', `n${i + 1}`];
      args.push('-cluster', `nats://127.0.0.1:${routes[i]}`, '-cluster_name', 'baton-ready-test');
      args.push(
        '-routes',
        routes
          .filter((_, j) => j !== i)
          .map((p) => `nats://127.0.0.1:${p}`)
          .join(','),
      );
      children.push(spawn('nats-server', args, { stdio: 'ignore' }));
    }
    for (const port of ports) await listening(port);
    const urls = ports.map((p) => `nats://127.0.0.1:${p}`);
    // JetStream on a cluster answers once it has elected a meta leader.
    const deadline = Date.now() + 30_000;
    for (;;) {
      const handle = await connectNats({ servers: urls, reconnect: false, timeoutMs: 2000 }).catch(() => null);
      if (handle) {
        await handle.close();
        break;
      }
      if (Date.now() > deadline) throw new Error('the private cluster elected no JetStream meta leader within 30 s');
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    service = await runService({
      service: 'readiness-probe',
      defaultPort: 0,
      imports: [],
      redis: false,
      env: {
        NATS_URL: urls.join(','),
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
    for (const child of children) await kill(child);
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it('is 200 with jetstream true while the cluster has quorum; 503 with nats true and jetstream false once two nodes are gone', async () => {
    expect(await ready()).toEqual({ status: 200, body: { status: 'ready', checks: { nats: true, jetstream: true } } });
    await kill(children[1]!);
    await kill(children[2]!);
    // The service's connection stays up (on the node left, or back on it), while JetStream answers
    // nothing there, then "temporarily unavailable": no append can succeed.
    const deadline = Date.now() + 30_000;
    let last = await ready();
    while (!(last.status === 503 && last.body.checks['nats'] === true) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      last = await ready();
    }
    expect(last).toEqual({ status: 503, body: { status: 'not_ready', checks: { nats: true, jetstream: false } } });
  }, 60_000);
});
