// A service that cannot use a server it needs at start says which, and which variable to look at,
// in one line (no stack trace), and exits 1; a bad setting exits 78 naming the variable.
import { randomBytes } from 'node:crypto';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { batonStreamNames, connectNats } from '@baton/eventstore';
import { freePort, startService, stopService, type ServiceProcess } from '@baton/testing';
import { waitFor } from '@baton/wait';

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';

/** Start `name` with `env`, wait for it to exit, and give its exit code and everything it wrote. */
async function failedStart(name: string, env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const service: ServiceProcess = startService(name, await freePort(), { LOG_LEVEL: 'error', ...env });
  const code = await new Promise<number | null>((resolve) => service.child.on('exit', (exitCode) => resolve(exitCode)));
  return { code, output: service.output.join('') };
}

/** One line naming what failed, with no stack frames. */
function expectOneLine(output: string, ...parts: RegExp[]): void {
  const lines = output.trim().split('\n');
  expect(lines).toHaveLength(1);
  for (const part of parts) expect(lines[0]).toMatch(part);
  expect(output).not.toMatch(/\n\s+at /);
}

describe('a service that cannot start says why in one line', () => {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'baton-start-failures-'));
  });

  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('NATS unreachable: "cannot reach NATS at <url> … (NATS_URL)", exit 1', async () => {
    const port = await freePort();
    const { code, output } = await failedStart('router', { NATS_URL: `nats://127.0.0.1:${port}`, BATON_NATS_AUTH: 'none' });
    expect(code).toBe(1);
    expectOneLine(output, /^baton router: failed to start: cannot reach NATS at nats:\/\/127\.0\.0\.1:\d+: /, /\(NATS_URL\)$/);
  }, 30_000);

  it('a credentials file that is missing or is no credentials file: named, with NATS_CREDS', async () => {
    const missing = await failedStart('ledger', { NATS_URL, NATS_CREDS: join(dir, 'nope.creds') });
    expect(missing.code).toBe(1);
    expectOneLine(missing.output, /^baton ledger: failed to start: cannot read the NATS credentials file .*nope\.creds: ENOENT/, /\(NATS_CREDS\)$/);
    const garbage = join(dir, 'garbage.creds');
    writeFileSync(garbage, 'not a credentials file\n');
    const bad = await failedStart('ledger', { NATS_URL, NATS_CREDS: garbage });
    expect(bad.code).toBe(1);
    expectOneLine(bad.output, /^baton ledger: failed to start: /, /\(NATS_CREDS\)$/);
  }, 60_000);

  it('the notifier with Redis unreachable: "cannot reach Redis at <url> … (REDIS_URL)", exit 1, its NATS connection closed', async () => {
    const prefix = `t${randomBytes(5).toString('hex')}`;
    const port = await freePort();
    try {
      const { code, output } = await failedStart('notifier', {
        NATS_URL,
        BATON_NATS_AUTH: 'none',
        BATON_PREFIX: prefix,
        REDIS_URL: `redis://user:secret@127.0.0.1:${port}`,
      });
      expect(code).toBe(1);
      expectOneLine(output, /^baton notifier: failed to start: cannot reach Redis at redis:\/\/user:\*\*\*@127\.0\.0\.1:\d+: /, /\(REDIS_URL\)$/);
      expect(output).not.toContain('secret');
    } finally {
      const nats = await connectNats({ servers: NATS_URL, reconnect: false });
      const names = batonStreamNames(prefix);
      for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
      await nats.close();
    }
  }, 60_000);

  it('a malformed address is a configuration problem: exit 78 naming the variable, before any connection', async () => {
    const { code, output } = await failedStart('router', { NATS_URL: 'nats://127.0.0.1:99999', BATON_NATS_AUTH: 'none' });
    expect(code).toBe(78);
    expect(output).toContain('NATS_URL: "nats://127.0.0.1:99999" is not a valid URL');
    expect(output).not.toMatch(/\n\s+at /);
  }, 30_000);
});

describe('a service that starts with a setting of its own it does not read', () => {
  it('names it in a warn line, with the known name nearest to it, and serves on with the default', async () => {
    const prefix = `t${randomBytes(5).toString('hex')}`;
    const port = await freePort();
    const service = startService('watchdog', port, {
      NATS_URL,
      BATON_NATS_AUTH: 'none',
      BATON_PREFIX: prefix,
      LOG_LEVEL: 'warn',
      LOG_FORMAT: 'json',
      WATCHDOG_SNAPSHOT_INTERVAL: '1000',
    });
    try {
      const line = await waitFor(
        async () =>
          service.output
            .join('')
            .split('\n')
            .find((text) => text.includes('WATCHDOG_SNAPSHOT_INTERVAL (did you mean WATCHDOG_SNAPSHOT_INTERVAL_MS?)')),
        'the warn line',
        { timeoutMs: 20_000 },
      );
      expect(JSON.parse(line)).toMatchObject({
        level: 'warn',
        service: 'watchdog',
        variables: ['WATCHDOG_SNAPSHOT_INTERVAL (did you mean WATCHDOG_SNAPSHOT_INTERVAL_MS?)'],
      });
      await waitFor(
        async () => ((await fetch(`http://127.0.0.1:${port}/health/ready`).catch(() => null))?.status === 200 ? true : undefined),
        'the watchdog ready',
      );
    } finally {
      await stopService(service);
      const nats = await connectNats({ servers: NATS_URL, reconnect: false });
      const names = batonStreamNames(prefix);
      for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
      await nats.close();
    }
  }, 40_000);

  it('names it even when the start then fails (NATS unreachable): the warn line comes before the failure line', async () => {
    const unreachable = await freePort();
    const { code, output } = await failedStart('watchdog', {
      NATS_URL: `nats://127.0.0.1:${unreachable}`,
      BATON_NATS_AUTH: 'none',
      LOG_LEVEL: 'warn',
      LOG_FORMAT: 'json',
      WATCHDOG_SNAPSHOT_INTERVAL: '1000',
    });
    expect(code).toBe(1);
    const warn = output.indexOf('WATCHDOG_SNAPSHOT_INTERVAL (did you mean WATCHDOG_SNAPSHOT_INTERVAL_MS?)');
    const failure = output.indexOf('baton watchdog: failed to start: cannot reach NATS');
    expect(warn).toBeGreaterThanOrEqual(0);
    expect(failure).toBeGreaterThan(warn);
  }, 30_000);
});
