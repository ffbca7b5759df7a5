// A nats-server of the test's own, on a free loopback port, trusting a fresh Baton deployment's
// operator (decentralized auth, memory resolver): what `baton nats-config` writes. Used by the
// tests that prove the server, not the message, decides who is speaking.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ServiceNameSchema } from '@baton/contracts';
import { credsPath, ensureServiceCreds, openDeployment, writeServerConfig, type AuthDeployment, type NatsHandle } from '@baton/eventstore';
// The private servers' helpers live with the integration specs' (one copy for libs and suites alike).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { freePort, startNatsServer } from '../../eventstore/src/int/servers';

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

/** Start nats-server with a new deployment's operator config for `prefix`. */
export async function startAuthNatsServer(prefix: string): Promise<AuthNatsServer> {
  const dir = mkdtempSync(join(tmpdir(), 'baton-auth-'));
  const deployment = openDeployment(join(dir, 'nats-auth'), prefix);
  ensureServiceCreds(deployment);
  const port = await freePort();
  const conf = writeServerConfig(deployment, { listen: `127.0.0.1:${port}`, storeDir: join(dir, 'js') });
  const server = await startNatsServer({ port, config: conf }).catch((error: unknown) => {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`nats-server with auth did not start: ${(error as Error).message}`);
  });
  return {
    url: server.url,
    port,
    deployment,
    output: server.output,
    child: server.child,
    reload: () => server.reload(),
    async stop() {
      await server.remove();
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
