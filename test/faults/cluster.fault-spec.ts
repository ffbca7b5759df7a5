import { batonStreamNames, connectNats } from '@baton/eventstore';
import {
  connectWhenJetStreamReady,
  driveLoad,
  foldAndCheck,
  freePort,
  type Platform,
  randomPrefix,
  settleAndCheck,
  sleep,
  startLoadPlatform,
  startNatsServer,
  stopLoadPlatform,
  summary,
  type ServerProcess,
} from './harness';

describe('fault: a three-node nats-server cluster with replicated streams (R3), one node killed under load', () => {
  const nodes: ServerProcess[] = [];
  let platform: Platform;
  let urls: string[];
  const prefix = randomPrefix('c');
  const project = 'faults';

  beforeAll(async () => {
    const clientPorts = [await freePort(), await freePort(), await freePort()];
    const clusterPorts = [await freePort(), await freePort(), await freePort()];
    for (let i = 0; i < 3; i++) {
      nodes.push(
        await startNatsServer({
          name: `n${i + 1}`,
          port: clientPorts[i]!,
          cluster: { port: clusterPorts[i]!, routes: clusterPorts.filter((_, j) => j !== i) },
        }),
      );
    }
    urls = nodes.map((n) => n.url);
    // JetStream on a cluster is ready once a meta leader is elected: wait until an account info call answers.
    const deadline = Date.now() + 30_000;
    for (;;) {
      const handle = await connectNats({ servers: urls, reconnect: false }).catch(() => null);
      if (handle) {
        await handle.close();
        break;
      }
      if (Date.now() > deadline) throw new Error(`the cluster has no JetStream meta leader:\n${nodes.map((n) => n.output.join('').slice(-800)).join('\n')}`);
      await sleep(500);
    }
    platform = await startLoadPlatform(urls, prefix, project, { BATON_STREAM_REPLICAS: '3' });
  }, 150_000);

  afterAll(() => stopLoadPlatform(platform, urls, prefix, nodes), 60_000);

  it('streams are provisioned with 3 replicas; after kill -9 of one node the services continue, and once it is back nothing acknowledged is lost or doubled', async () => {
    try {
      const check = await connectWhenJetStreamReady(urls, 'cluster-check');
      const names = batonStreamNames(prefix);
      for (const stream of [names.events, names.inbox, names.dlq]) expect((await check.jsm.streams.info(stream)).config.num_replicas).toBe(3);
      // Kill the node that leads the events stream: the worst case (a leader election mid-write).
      const leaderName = (await check.jsm.streams.info(names.events)).cluster?.leader;
      await check.close();
      const victim = nodes.find((n) => n.name.endsWith(` ${leaderName}`)) ?? nodes[0]!;
      const survivors = urls.filter((u) => u !== victim.url);

      // Each agent waits up to 90 s for the handoff it claims: while the node is down, a ledger
      // `create` can need four retries (backoff 1, 5, 15, 30 s, each attempt up to a 5 s request
      // timeout: about 75 s) before the handoff exists (docs/reliability.md, anomaly 1).
      const loadDone = driveLoad({ natsUrl: urls, prefix, project, runs: 100, concurrency: 6, stepTimeoutMs: 90_000 });
      await sleep(3000);
      await victim.stop('SIGKILL');
      const load = await loadDone;
      // While the node is down: the router kept routing every run (results, outcomes, completions).
      const whileDown = await foldAndCheck(survivors, prefix, project, load);
      expect(load.unfinished).toEqual([]);
      expect(whileDown.resultOutcomes).toEqual([]);
      expect(whileDown.incompleteRuns).toEqual([]);
      expect(whileDown.duplicateEventIds).toEqual([]);
      expect([...platform.services.values()].every((s) => s.child.exitCode === null)).toBe(true);
      // The node comes back; the handoff ledger catches up: every handoff created and completed once.
      await victim.restart();
      const { anomalies, settledMs } = await settleAndCheck(urls, prefix, project, load, 90_000);
      process.stdout.write(
        `${summary('three-node cluster, kill -9 one node', load, anomalies, { killed: victim.name, handoffsLaggingWhileDown: whileDown.handoffs.length, settledAfterRestartMs: settledMs })}\n`,
      );
      if (process.env['FAULT_DEBUG']) await platform.dumpLogs(`/tmp/fault-logs/${prefix}`);
      expect(anomalies.resultOutcomes).toEqual([]);
      expect(anomalies.incompleteRuns).toEqual([]);
      expect(anomalies.handoffs).toEqual([]);
      expect(anomalies.duplicateEventIds).toEqual([]);
      expect(anomalies.counts.results).toBe(2 * 100);
      expect(anomalies.counts.handoffs).toBe(2 * 100);
    } catch (error) {
      throw platform.withLogs(error);
    }
  });
});
