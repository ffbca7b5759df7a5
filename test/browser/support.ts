import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { ensureTokenKeyFile } from '@baton/platform';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { connectNats, type NatsHandle } from '@baton/eventstore';
import { createRedis, type RedisHandle } from '@baton/projections';
import { cleanupDeployment, freePort, repoRoot, run, startService, stopService, waitFor, waitReady, type ServiceProcess } from '@baton/testing';

/*
 * What the browser tests share: the four services as processes on the shared servers under a
 * fresh prefix, an operator token made with the CLI, the project's definition published through
 * the router, and headless Debian Chromium with the flags this machine needs.
 */

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Where the tests write their screenshots. */
export const SHOTS = join(repoRoot(), 'var', 'screenshots');

export interface BrowserPlatform {
  nats: NatsHandle;
  redis: RedisHandle;
  /** The notifier's HTTP base URL. */
  base: string;
  /** An operator token for the project (`baton token create --role operator`). */
  token: string;
  /** GET a JSON route of the API with the operator's token. */
  api<T>(path: string): Promise<T>;
  /** Poll for a value for up to 20 s (`what` names it in the timeout error). */
  waitUntil<T>(what: string, probe: () => Promise<T | undefined>): Promise<T>;
  /** Stop the services and delete the prefix's streams and keys. */
  stop(): Promise<void>;
}

/**
 * Start the platform for `project` under `prefix` and publish `definition`; `tag` names the service
 * instances; `extraEnv` is added to every service's environment (a notifier setting, say).
 */
export async function startBrowserPlatform(
  prefix: string,
  project: string,
  definition: unknown,
  tag: string,
  extraEnv: Record<string, string> = {},
): Promise<BrowserPlatform> {
  const natsUrl = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
  const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
  // The deployment's token key: the notifier trusts only token records signed with it, and the CLI signs with it.
  const keyDir = await mkdtemp(join(tmpdir(), 'baton-browser-key-'));
  const env = {
    NATS_URL: natsUrl,
    REDIS_URL: redisUrl,
    BATON_PREFIX: prefix,
    LOG_LEVEL: 'warn',
    WATCHDOG_TICK_MS: '500',
    BATON_TOKEN_KEY_FILE: ensureTokenKeyFile(keyDir).key.file,
    ...extraEnv,
  };
  await mkdir(SHOTS, { recursive: true });
  const nats = await connectNats({ servers: natsUrl, reconnect: false });
  const redis = createRedis(redisUrl);
  const services: ServiceProcess[] = [];
  const stop = async () => {
    await Promise.all(services.map((service) => stopService(service)));
    await cleanupDeployment(nats, redis.client, prefix).catch(() => undefined);
    await nats.close();
    await redis.close();
    await rm(keyDir, { recursive: true, force: true });
  };
  try {
    for (const name of ['ledger', 'router', 'watchdog', 'notifier']) services.push(startService(name, await freePort(), env, { instance: `${name}-${tag}` }));
    await Promise.all(services.map((service) => waitReady(service)));
    const base = `http://127.0.0.1:${services.find((s) => s.name === 'notifier')!.port}`;
    const made = await run(process.execPath, ['bin/baton.js', 'token', 'create', '--role', 'operator', '--project', project, '--name', 'olga', '--json'], env);
    if (made.code !== 0) throw new Error(`baton token create failed: ${made.stderr}`);
    const token = (JSON.parse(made.stdout) as { token: string }).token;
    const reply = await nats.connection.request(`${prefix}.cmd.router.${project}.publish_definition`, new TextEncoder().encode(JSON.stringify(definition)), {
      timeout: 10_000,
    });
    const published = JSON.parse(new TextDecoder().decode(reply.data)) as { ok: boolean };
    if (!published.ok) throw new Error(`the router refused the definition: ${JSON.stringify(published)}`);
    return {
      nats,
      redis,
      base,
      token,
      api: async <T>(path: string): Promise<T> => (await (await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } })).json()) as T,
      waitUntil: <T>(what: string, probe: () => Promise<T | undefined>) => waitFor(probe, what, { timeoutMs: 20_000, everyMs: 150 }),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Headless Chromium in a throw-away profile; `close` removes the profile too. */
export async function launchChromium(): Promise<{ context: BrowserContext; close(): Promise<void> }> {
  const userDataDir = await mkdtemp(join(tmpdir(), 'baton-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1280, height: 900 },
  });
  context.setDefaultTimeout(15_000);
  return {
    context,
    async close() {
      await context.close().catch(() => undefined);
      await rm(userDataDir, { recursive: true, force: true });
    },
  };
}
