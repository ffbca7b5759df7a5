// `npm start` (scripts/start.js) names the services' BATON_PREFIX in local.json and in its banner,
// and the baton CLI run in another shell (NATS_URL unset: it connects through local.json) takes
// that prefix when BATON_PREFIX is not set; a BATON_PREFIX that differs is used, with a
// `prefix_mismatch` warning. And which of its nats-server's lines npm start shows (nats-log-lines.js).
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRedis } from '@baton/projections';
import { freePort, npmStartMayRun, repoRoot } from '@baton/testing';
import { waitFor } from '@baton/wait';

const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
// npm start's nats-server keeps its data in the checkout's var/nats: not while a developer's npm start runs from it.
const itRunsServer = npmStartMayRun() ? it : it.skip;

// scripts/ holds plain Node scripts (no project of their own): load the module npm start uses.
const { natsLogLineShown } = createRequire(__filename)(join(__dirname, '..', '..', 'scripts', 'nats-log-lines.js')) as {
  natsLogLineShown: (line: string, state: Record<string, unknown>) => 'error' | 'log' | null;
};

describe('npm start and the prefix', () => {
  it('its nats-server’s lines: errors and warnings shown, reloads logged; the advisories a shutting-down 2.9 server cannot send (its eventing stopped first) left to the log file', () => {
    const state = {};
    const advisory = '[1] 2026/01/01 00:00:00.000000 [WRN] Advisory could not be sent for account "ABC": system account not setup';
    expect(natsLogLineShown('[1] … [ERR] Error configuring jetstream', state)).toBe('error');
    expect(natsLogLineShown('[1] … [INF] Reloaded server configuration', state)).toBe('log');
    expect(natsLogLineShown('[1] … [INF] Server is ready', state)).toBeNull();
    // Before the shutdown such a line would mean something: shown.
    expect(natsLogLineShown(advisory, state)).toBe('error');
    expect(natsLogLineShown('[1] 2026/01/01 00:00:00.000000 [INF] Initiating Shutdown...', state)).toBeNull();
    expect(natsLogLineShown(advisory, state)).toBeNull();
    // Any other warning while it stops is still shown.
    expect(natsLogLineShown('[1] … [WRN] Error flushing stream', state)).toBe('error');
  });

  itRunsServer(
    'local.json and the banner name the prefix; the CLI in another shell uses it without BATON_PREFIX, and warns (prefix_mismatch) when BATON_PREFIX names another',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'baton-start-prefix-'));
      const prefix = `pfx${randomBytes(4).toString('hex')}`;
      const ports = {
        LEDGER_HTTP_PORT: await freePort(),
        ROUTER_HTTP_PORT: await freePort(),
        WATCHDOG_HTTP_PORT: await freePort(),
        NOTIFIER_HTTP_PORT: await freePort(),
      };
      const env: Record<string, string | undefined> = {
        ...process.env,
        ...Object.fromEntries(Object.entries(ports).map(([key, port]) => [key, String(port)])),
        BATON_NATS_DIR: dir,
        NATS_PORT: String(await freePort()),
        REDIS_URL: redisUrl,
        BATON_SKIP_BUILD: '1',
        BATON_PREFIX: prefix,
        LOG_LEVEL: 'warn',
        LOG_FORMAT: 'json',
      };
      for (const key of ['NATS_URL', 'NATS_CREDS', 'BATON_NATS_AUTH']) delete env[key];
      const start = spawn(process.execPath, [join(repoRoot(), 'scripts', 'start.js')], { cwd: repoRoot(), env, stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      start.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      start.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const exited = once(start, 'exit');
      try {
        for (const port of Object.values(ports)) {
          await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/health/ready`).catch(() => null))?.status === 200, `the service on ${port} ready`, {
            timeoutMs: 60_000,
          });
        }
        const local = JSON.parse(readFileSync(join(dir, 'local.json'), 'utf8')) as { prefix?: string };
        expect(local.prefix).toBe(prefix);
        expect(output).toContain(`[start] Baton is starting (BATON_PREFIX=${prefix})`);
        expect(output).toContain(`local.json (prefix ${prefix})`);

        // Another shell: only the deployment folder (as the default ./var/nats-auth would be found).
        const shell: Record<string, string | undefined> = { PATH: process.env['PATH'], HOME: process.env['HOME'], BATON_NATS_DIR: dir };
        const baton = (extra: Record<string, string>, ...args: string[]) =>
          spawnSync(process.execPath, [join(repoRoot(), 'dist', 'apps', 'cli', 'src', 'main.js'), ...args], {
            cwd: repoRoot(),
            encoding: 'utf8',
            env: { ...shell, ...extra },
          });
        const streams = baton({}, 'streams', '--json');
        expect({ status: streams.status, stderr: streams.stderr }).toEqual({ status: 0, stderr: '' });
        expect(streams.stdout).toContain(`${prefix.toUpperCase()}_EVENTS`);

        const other = baton({ BATON_PREFIX: `${prefix}x` }, 'streams', '--json');
        const warned = other.stderr
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .flatMap((line) => {
            const parsed = JSON.parse(line) as { warnings?: { code: string }[]; error?: { details?: { warnings?: { code: string }[] } } };
            return parsed.warnings ?? parsed.error?.details?.warnings ?? [];
          });
        expect(warned.map((warning) => warning.code)).toContain('prefix_mismatch');
      } finally {
        if (start.exitCode === null && start.signalCode === null) {
          start.kill('SIGTERM');
          await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 25_000))]);
          if (start.exitCode === null && start.signalCode === null) start.kill('SIGKILL');
        }
        try {
          const { account } = JSON.parse(readFileSync(join(dir, 'deployment.json'), 'utf8')) as { account: string };
          rmSync(join(repoRoot(), 'var', 'nats', 'jetstream', account), { recursive: true, force: true });
        } catch {
          // no deployment was made
        }
        rmSync(dir, { recursive: true, force: true });
        const redis = createRedis(redisUrl);
        try {
          for await (const batch of redis.client.scanStream({ match: `${prefix}:*`, count: 1000 })) {
            if ((batch as string[]).length > 0) await redis.client.unlink(...(batch as string[]));
          }
        } finally {
          await redis.close();
        }
      }
    },
    150_000,
  );
});
