import { connectNats } from '@baton/eventstore';
import { deleteStreams, driveLoad, Platform, publishDefinition, randomPrefix, removeServers, settleAndCheck, sleep, startNatsServer, summary, type ServerProcess } from './harness';

const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

describe('fault: restart nats-server (file storage) under load', () => {
  let nats: ServerProcess;
  let platform: Platform;
  const prefix = randomPrefix('n');
  const project = 'faults';

  beforeAll(async () => {
    nats = await startNatsServer();
    platform = await Platform.start(
      { NATS_URL: nats.url, REDIS_URL: redisUrl, BATON_PREFIX: prefix, LOG_LEVEL: process.env['FAULT_LOG_LEVEL'] ?? 'error', WATCHDOG_TICK_MS: '500' },
      process.env['FAULT_SERVICES'] ? process.env['FAULT_SERVICES'].split(',') : undefined,
    );
    const handle = await connectNats({ servers: nats.url, reconnect: false });
    await publishDefinition(handle, prefix, project);
    await handle.close();
  }, 120_000);

  afterAll(async () => {
    await platform?.stop();
    await deleteStreams(nats.url, prefix);
    await removeServers([nats]);
  }, 60_000);

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
    process.stdout.write(`${summary('restart nats-server', load, anomalies, { restarts, settledMs, firstCheck: firstCheck.handoffs.concat(firstCheck.resultOutcomes, firstCheck.incompleteRuns).slice(0, 5) })}\n`);
    expect(load.unfinished).toEqual([]);
    expect(anomalies.resultOutcomes).toEqual([]);
    expect(anomalies.incompleteRuns).toEqual([]);
    expect(anomalies.handoffs).toEqual([]);
    expect(anomalies.duplicateEventIds).toEqual([]);
    expect(anomalies.counts.results).toBe(2 * 150);
    expect([...platform.services.values()].every((s) => s.child.exitCode === null)).toBe(true);
  });
});
