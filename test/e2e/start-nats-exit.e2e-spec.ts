// `npm start` (scripts/start.js) with its own nats-server: when that server exits while the
// platform runs (killed, crashed, stopped by hand), npm start says so on its terminal — the exit
// code or signal and the log to read — and stops the platform, as it does when a service exits.
// Each service has said that its NATS connection was lost before it is stopped.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRedis } from '@baton/projections';
import { freePort, npmStartMayRun, repoRoot } from '@baton/testing';
import { waitFor } from '@baton/wait';

const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
// npm start's nats-server keeps its data in the checkout's var/nats: not while a developer's npm start runs from it.
const itRunsServer = npmStartMayRun() ? it : it.skip;

describe('npm start when its own nats-server exits', () => {
  itRunsServer(
    'prints an error line with the signal and its log, the services say the connection was lost, and the platform stops (exit 1)',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'baton-start-nats-exit-'));
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
        BATON_PREFIX: `exit${randomBytes(4).toString('hex')}`,
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
        const local = JSON.parse(readFileSync(join(dir, 'local.json'), 'utf8')) as { nats_server: { pid: number; log: string } };
        process.kill(local.nats_server.pid, 'SIGTERM');
        const [code] = (await exited) as [number | null];
        expect(code).toBe(1);
        // nats-server 2.9 handles SIGTERM by shutting down and calling exit(1), but its main goroutine
        // returns (exit 0) as soon as the shutdown completes: which exit wins is a race, so either
        // code is the server's own exit (a SIGKILL would read "signal SIGKILL").
        const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
        expect(output).toMatch(
          new RegExp(
            escaped(`[start] error (nats_server_exited): its nats-server (pid ${local.nats_server.pid}) exited (code `) +
              '[01]' +
              escaped(`); its log: ${local.nats_server.log}; stopping the platform`),
          ),
        );
        // Every service said it lost the connection (a warn line, JSON with LOG_FORMAT=json).
        for (const service of ['ledger', 'router', 'watchdog', 'notifier']) {
          expect(output).toMatch(new RegExp(`\\[${service}\\]\\s+\\{[^\\n]*"level":"warn"[^\\n]*"msg":"NATS connection lost; reconnecting"`));
        }
        // It removed its local.json: the CLI no longer finds a server that is gone.
        expect(existsSync(join(dir, 'local.json'))).toBe(false);
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
        // The projections the platform's notifier built under this test's prefix.
        const redis = createRedis(redisUrl);
        try {
          for await (const batch of redis.client.scanStream({ match: `${env['BATON_PREFIX']}:*`, count: 1000 })) {
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
