// A nats-server of the test's own, on a free loopback port, trusting a fresh Baton deployment's
// operator (decentralized auth, memory resolver): what `baton nats-config` writes. Used by the
// tests that prove the server, not the message, decides who is speaking.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ServiceNameSchema } from '@baton/contracts';
import { credsPath, ensureServiceCreds, openDeployment, writeServerConfig, type AuthDeployment, type NatsHandle } from '@baton/eventstore';
import { freePort } from './processes';

export interface AuthNatsServer {
  url: string;
  port: number;
  deployment: AuthDeployment;
  output: string[];
  child: ChildProcess;
  /**
   * Have the server reload its configuration file (SIGHUP, as `nats-server --signal reload` sends)
   * and resolve once it logs that it did; rejects with its words when it refused the reload.
   */
  reload(): Promise<void>;
  stop(): Promise<void>;
}

async function waitPort(port: number, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = netConnect({ host: '127.0.0.1', port });
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nothing listens on 127.0.0.1:${port}`);
}

/** Start nats-server with a new deployment's operator config for `prefix`. */
export async function startAuthNatsServer(prefix: string): Promise<AuthNatsServer> {
  const dir = mkdtempSync(join(tmpdir(), 'baton-auth-'));
  const deployment = openDeployment(join(dir, 'nats-auth'), prefix);
  ensureServiceCreds(deployment);
  const port = await freePort();
  const conf = writeServerConfig(deployment, { listen: `127.0.0.1:${port}`, storeDir: join(dir, 'js') });
  const output: string[] = [];
  const child = spawn('nats-server', ['-c', conf], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.on('data', (c: Buffer) => output.push(c.toString()));
  child.stderr?.on('data', (c: Buffer) => output.push(c.toString()));
  try {
    await waitPort(port);
  } catch (error) {
    child.kill('SIGKILL');
    throw new Error(`nats-server with auth did not start: ${(error as Error).message}\n${output.join('')}`);
  }
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    deployment,
    output,
    child,
    async reload() {
      const from = output.join('').length;
      child.kill('SIGHUP');
      const until = Date.now() + 5_000;
      while (Date.now() < until) {
        const since = output.join('').slice(from);
        const failed = /Failed to reload server configuration: .*/.exec(since);
        if (failed) throw new Error(`nats-server refused the reload: ${failed[0]}`);
        if (since.includes('Reloaded server configuration')) return;
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error(`nats-server did not report a reload within 5 s\n${output.join('').slice(from)}`);
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = once(child, 'exit');
        child.kill('SIGKILL');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Run `act` (publishes, subscriptions) and collect the server's permission violations it causes,
 * as `publish <subject>` / `subscription <subject>`. The server answers a violation with an
 * asynchronous `-ERR`; a flush round trip plus a short settle lets every one arrive.
 */
export async function permissionViolations(handle: Pick<NatsHandle, 'connection'>, act: () => void | Promise<void>): Promise<string[]> {
  const seen: string[] = [];
  const statuses = handle.connection.status() as ReturnType<NatsHandle['connection']['status']> & { stop(): void };
  const collecting = (async () => {
    for await (const status of statuses) {
      const context = (status as { permissionContext?: { operation: string; subject: string } }).permissionContext;
      if (context) seen.push(`${context.operation} ${context.subject}`);
    }
  })();
  await act();
  await handle.connection.flush().catch(() => undefined);
  await new Promise((r) => setTimeout(r, 250));
  statuses.stop();
  await collecting;
  return seen;
}

/**
 * Per-service settings for a platform on an authenticated server: each service presents its own
 * credentials file from the deployment (use as `startPlatform`'s `envFor`).
 */
export function serviceCredsEnv(server: AuthNatsServer): (name: string) => Record<string, string> {
  return (name) => ({ BATON_NATS_AUTH: 'creds', NATS_CREDS: credsPath(server.deployment, { kind: 'svc', service: ServiceNameSchema.parse(name) }) });
}
