import { batonTopology, connectNats, isTransientApiError, provision, ProvisionError, type NatsHandle } from '@baton/eventstore';
import { freePort, randomPrefix, removeServers, sleep, startNatsServer, type ServerProcess } from './harness';

/**
 * A service provisions its streams at start. On a three-node cluster that has no JetStream meta
 * leader yet (one node up of three: no quorum), the API answers late or "temporarily unavailable";
 * provisioning keeps asking until a second node joins, and gives up with a ProvisionError naming
 * the call when its deadline passes first.
 */
describe('fault: provisioning on a cluster without a JetStream meta leader', () => {
  const nodes: ServerProcess[] = [];
  let clientPorts: number[];
  let clusterPorts: number[];
  let handle: NatsHandle | undefined;
  const prefix = randomPrefix('p');

  const startNode = async (i: number) => {
    nodes.push(
      await startNatsServer({
        name: `n${i + 1}`,
        port: clientPorts[i]!,
        cluster: { port: clusterPorts[i]!, routes: clusterPorts.filter((_, j) => j !== i) },
      }),
    );
  };

  beforeAll(async () => {
    clientPorts = [await freePort(), await freePort(), await freePort()];
    clusterPorts = [await freePort(), await freePort(), await freePort()];
    await startNode(0);
    // No meta leader yet, so the client must not ask for account info on connecting.
    handle = await connectNats({ servers: [`nats://127.0.0.1:${clientPorts[0]}`], checkJetStream: false, timeoutMs: 1000 });
  }, 60_000);

  afterAll(async () => {
    await handle?.close();
    await removeServers(nodes);
  }, 60_000);

  it('gives up after its deadline with a ProvisionError naming the call, the cause a transient API failure', async () => {
    const started = Date.now();
    const stream = batonTopology(prefix, { replicas: 1 }).streams[0]!;
    const failure = await provision(handle!.jsm, { streams: [stream] }, { retryForMs: 2500 }).then(
      () => null,
      (err: unknown) => err,
    );
    expect(failure).toBeInstanceOf(ProvisionError);
    expect((failure as ProvisionError).message).toMatch(new RegExp(`^stream info ${stream.name}: still failing after \\d+ attempt`));
    expect(isTransientApiError((failure as ProvisionError).cause)).toBe(true);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('keeps asking while the cluster elects its meta leader, and creates the streams once a second node is up', async () => {
    const retries: string[] = [];
    const topology = batonTopology(prefix, { replicas: 1 });
    const provisioned = provision(handle!.jsm, { streams: topology.streams }, { onRetry: (what) => retries.push(what) });
    await sleep(2000);
    await startNode(1);
    const report = await provisioned;
    expect(retries.length).toBeGreaterThan(0);
    expect(retries[0]).toBe(`stream info ${topology.streams[0]!.name}`);
    expect(Object.values(report.streams)).toEqual(topology.streams.map(() => 'created'));
    const info = await handle!.jsm.streams.info(topology.streams[0]!.name);
    expect(info.config.name).toBe(topology.streams[0]!.name);
  }, 120_000);
});
