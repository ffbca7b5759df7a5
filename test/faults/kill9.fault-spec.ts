import {
  driveLoad,
  settleAndCheck,
  type Platform,
  randomPrefix,
  sleep,
  startLoadPlatform,
  startNatsServer,
  stopLoadPlatform,
  summary,
  type ServerProcess,
} from './harness';

describe('fault: kill -9 each service in turn under a steady load of agent results', () => {
  let nats: ServerProcess;
  let platform: Platform;
  const prefix = randomPrefix('k');
  const project = 'faults';

  beforeAll(async () => {
    nats = await startNatsServer();
    platform = await startLoadPlatform(nats.url, prefix, project);
  }, 120_000);

  afterAll(() => stopLoadPlatform(platform, nats.url, prefix, [nats]), 60_000);

  it('afterwards every published result has exactly one routing outcome, and no handoff transition is duplicated or missing (folded from the streams)', async () => {
    // Enough load to outlast four kills and restarts (Baton got faster; the load must not end first).
    const loadDone = driveLoad({ natsUrl: nats.url, prefix, project, runs: 900, concurrency: 6 });
    let stopped = false;
    void loadDone.finally(() => (stopped = true));
    const killed: string[] = [];
    // One kill -9 per service, spread over the load: router, ledger, watchdog, notifier.
    for (const name of ['router', 'ledger', 'watchdog', 'notifier'].filter((n) => platform.services.has(n))) {
      await sleep(1500);
      if (stopped) break;
      await platform.killAndRestart(name);
      killed.push(name);
    }
    const load = await loadDone;
    expect(killed).toEqual(['router', 'ledger', 'watchdog', 'notifier'].filter((n) => platform.services.has(n)));
    const { anomalies, settledMs, firstCheck } = await settleAndCheck(nats.url, prefix, project, load);
    process.stdout.write(
      `${summary('kill -9 router, ledger, watchdog, notifier', load, anomalies, { killed, settledMs, firstCheck: firstCheck.handoffs.concat(firstCheck.resultOutcomes, firstCheck.incompleteRuns) })}\n`,
    );
    expect(load.unfinished).toEqual([]);
    expect(anomalies.resultOutcomes).toEqual([]);
    expect(anomalies.incompleteRuns).toEqual([]);
    expect(anomalies.handoffs).toEqual([]);
    expect(anomalies.duplicateEventIds).toEqual([]);
    expect(anomalies.counts.results).toBe(2 * 900);
    expect(anomalies.counts.handoffs).toBe(2 * 900);
    expect([...platform.services.values()].every((s) => s.child.exitCode === null)).toBe(true);
  });
});
