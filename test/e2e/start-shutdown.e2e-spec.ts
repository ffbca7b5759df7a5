// `npm start` (scripts/start.js) stops what it started: on SIGTERM or Ctrl-C it stops the four
// services, waits until each has exited, and only then exits itself — no service left running.
// The per-service port variables it reads (NOTIFIER_HTTP_PORT…) are its own: each service gets
// its port as HTTP_PORT and never the variable (which it would warn it ignores), and the start
// banner names the ports they chose.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { connectNats } from '@baton/eventstore';
import { createRedis } from '@baton/projections';
import { cleanupDeployment, freePort, repoRoot } from '@baton/testing';
import { waitFor } from '@baton/wait';

const natsUrl = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

/** The processes whose parent is `pid` (from /proc: this suite runs on Linux). */
function childrenOf(pid: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // pid (comm) state ppid ...: comm may hold spaces, so read after its closing parenthesis.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) found.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return found;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('npm start stops what it started', () => {
  it('on SIGTERM the four services stop and have exited before npm start exits (0)', async () => {
    const prefix = `start${randomBytes(4).toString('hex')}`;
    const ports = {
      LEDGER_HTTP_PORT: await freePort(),
      ROUTER_HTTP_PORT: await freePort(),
      WATCHDOG_HTTP_PORT: await freePort(),
      NOTIFIER_HTTP_PORT: await freePort(),
    };
    const start = spawn(process.execPath, [join(repoRoot(), 'scripts', 'start.js')], {
      cwd: repoRoot(),
      env: {
        ...process.env,
        ...Object.fromEntries(Object.entries(ports).map(([key, port]) => [key, String(port)])),
        BATON_SKIP_BUILD: '1',
        NATS_URL: natsUrl,
        BATON_NATS_AUTH: 'none',
        REDIS_URL: redisUrl,
        BATON_PREFIX: prefix,
        LOG_LEVEL: 'warn',
        LOG_FORMAT: 'json',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    start.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    start.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const nats = await connectNats({ servers: natsUrl, reconnect: false });
    const redis = createRedis(redisUrl);
    try {
      // Every service answers ready on its port.
      for (const port of Object.values(ports)) {
        await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/health/ready`).catch(() => null))?.status === 200, `the service on ${port} ready`, {
          timeoutMs: 60_000,
        });
      }
      const services = childrenOf(start.pid!);
      expect(services).toHaveLength(4);
      // The ports the variables chose, in the banner; no service warns about npm start's variables.
      const api = `http://127.0.0.1:${ports.NOTIFIER_HTTP_PORT}`;
      expect(output).toContain(`[start] Baton is starting (BATON_PREFIX=${prefix}): operator API and inbox on ${api};`);
      expect(output).toContain(`ledger ${ports.LEDGER_HTTP_PORT}, router ${ports.ROUTER_HTTP_PORT}, watchdog ${ports.WATCHDOG_HTTP_PORT}`);
      expect(output).toContain(`BATON_API_URL=${api}`);
      expect(output).not.toContain('does not read are ignored');
      expect(output).not.toContain('_HTTP_PORT');

      const exited = once(start, 'exit');
      start.kill('SIGTERM');
      const [code] = (await exited) as [number | null];
      expect(code).toBe(0);
      // Nothing it started outlives it.
      expect(services.filter(alive)).toEqual([]);
      expect(output).not.toContain('did not stop within');
    } finally {
      // A failed assertion above: stop it as a person would (SIGTERM, which stops its services),
      // and only then kill what is left — killing npm start first would leave its services running.
      if (start.exitCode === null && start.signalCode === null) {
        const left = childrenOf(start.pid!);
        const exited = once(start, 'exit');
        start.kill('SIGTERM');
        await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 20_000))]);
        if (start.exitCode === null && start.signalCode === null) start.kill('SIGKILL');
        for (const pid of left.filter(alive)) process.kill(pid, 'SIGKILL');
      }
      await cleanupDeployment(nats, redis.client, prefix);
      await redis.close();
      await nats.close();
    }
  }, 120_000);
});
