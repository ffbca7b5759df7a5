import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { batonStreamNames, connectNats } from '@baton/eventstore';
import { runService, type RunningService } from '../service/bootstrap';
import { metricSample } from './exposition';
import { MetricName, SERVICE_METRICS } from './metrics';

/*
 * Each metric on the `/metrics` of the services it belongs to only (SERVICE_METRICS): the ledger's
 * sheds and edge relay counts nowhere else, the resumed commands on the router and the ledger, the
 * rest everywhere. Services started as `runService` does them (real NATS), `GET /metrics` read.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';

/** The metric names `GET /metrics` of `service` names (samples or HELP lines). */
async function exposedBy(service: string, prefix: string): Promise<{ text: string; names: Set<string> }> {
  let running: RunningService | null = null;
  try {
    running = await runService({
      service,
      defaultPort: 0,
      imports: [],
      redis: false,
      env: { NATS_URL, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: 'error' },
    });
    const response = await fetch(`${await running.app.getUrl()}/metrics`);
    expect(response.status).toBe(200);
    const text = await response.text();
    const names = new Set(text.split('\n').flatMap((line) => /^# (?:HELP|TYPE) (\S+)/.exec(line)?.[1] ?? /^([a-z_]+)[{ ]/.exec(line)?.[1] ?? []));
    return { text, names };
  } finally {
    await running?.stop();
  }
}

describe('each metric is exposed by the services it belongs to only (runService, real NATS)', () => {
  const prefix = `sm${randomBytes(5).toString('hex')}`;

  afterAll(async () => {
    const nats = await connectNats({ servers: NATS_URL, reconnect: false });
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
    await nats.drain();
  });

  it.each(['router', 'watchdog', 'notifier'])('the %s exposes no ledger metric (neither sample nor HELP line)', async (service) => {
    const { text, names } = await exposedBy(service, prefix);
    expect(names.has(MetricName.ledgerRequestsShed)).toBe(false);
    expect(names.has(MetricName.edgeMessages)).toBe(false);
    expect(text).not.toContain('baton_ledger_');
    // What every service has is there (the exposition was read whole).
    expect(names.has(MetricName.eventsHandled)).toBe(true);
    expect(names.has(MetricName.deadLetters)).toBe(true);
    expect(names.has(MetricName.foldCacheMaxBytes)).toBe(true);
    expect(names.has(MetricName.httpDuration)).toBe(true);
    // Resumed commands: the services that decide commands (the router; never the watchdog or the notifier).
    expect(names.has(MetricName.commandsResumed)).toBe(service === 'router');
  });

  it('the ledger exposes its own: the shed counter at 0, the edge relay counts, the resumed commands', async () => {
    const { text, names } = await exposedBy('ledger', prefix);
    expect(metricSample(text, MetricName.ledgerRequestsShed, { service: 'ledger' })).toBe(0);
    expect(names.has(MetricName.edgeMessages)).toBe(true);
    expect(names.has(MetricName.commandsResumed)).toBe(true);
  });

  it('the table names only services that exist (a misspelt one would hide a metric everywhere)', () => {
    const named = Object.values(SERVICE_METRICS).flatMap((services) => [...(services ?? [])]);
    expect(named.length).toBeGreaterThan(0);
    for (const service of named) expect(['router', 'ledger', 'watchdog', 'notifier']).toContain(service);
  });
});
