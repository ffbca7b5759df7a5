import {
  driveLoad,
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

describe('fault: restart nats-server (file storage) under load', () => {
  let nats: ServerProcess;
  let platform: Platform;
  const prefix = randomPrefix('n');
  const project = 'faults';

  beforeAll(async () => {
    nats = await startNatsServer();
    platform = await startLoadPlatform(nats.url, prefix, project);
  }, 120_000);

  afterAll(() => stopLoadPlatform(platform, nats.url, prefix, [nats]), 60_000);

  it('the services reconnect and finish; nothing acknowledged is lost (a graceful restart, then kill -9 of the server)', async () => {
    const loadDone = driveLoad({ natsUrl: nats.url, prefix, project, runs: 150, concurrency: 6 });
    const restarts: string[] = [];
    await sleep(3000);
    // SIGTERM: nats-server shuts down cleanly, then starts again on the same store.
    await nats.stop('SIGTERM');
    await sleep(1500);
    await nats.restart();
    restarts.push('SIGTERM');
    await sleep(4000);
    // SIGKILL: no shutdown at all.
    await nats.stop('SIGKILL');
    await sleep(1500);
    await nats.restart();
    restarts.push('SIGKILL');
    const load = await loadDone;
    const { anomalies, settledMs, firstCheck } = await settleAndCheck(nats.url, prefix, project, load);
    process.stdout.write(
      `${summary('restart nats-server', load, anomalies, { restarts, settledMs, firstCheck: firstCheck.handoffs.concat(firstCheck.resultOutcomes, firstCheck.incompleteRuns).slice(0, 5) })}\n`,
    );
    expect(load.unfinished).toEqual([]);
    expect(anomalies.resultOutcomes).toEqual([]);
    expect(anomalies.incompleteRuns).toEqual([]);
    expect(anomalies.handoffs).toEqual([]);
    expect(anomalies.duplicateEventIds).toEqual([]);
    expect(anomalies.counts.results).toBe(2 * 150);
    expect([...platform.services.values()].every((s) => s.child.exitCode === null)).toBe(true);
  });
});
