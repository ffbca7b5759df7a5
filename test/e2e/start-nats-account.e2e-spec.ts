// `npm start` (scripts/start.js) connects once to its own nats-server as the deployment's admin,
// alone, before it starts the services (scripts/nats-account.js): the server registers the
// account and enables its JetStream on that one connection. nats-server 2.9 does it at the
// account's first client; four services connecting at once were four first clients, whose
// enablings could meet on a fresh store — one removing the streams folder the other was making —
// and the server logged `[ERR] Error configuring jetstream for account … could not create storage
// streams directory` (harmless; seen on a fresh clone's first `npm start`, 3 starts in 105 measured).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inboxPrefixOf, ServiceNames, type Principal } from '@baton/contracts';
import { connectNats, credsPath, ensureServiceCreds, openDeployment, writeServerConfig } from '@baton/eventstore';
import { freePort, repoRoot } from '@baton/testing';
import { waitFor } from '@baton/wait';

// scripts/ holds plain Node scripts (no project of their own): load the module npm start uses.
const { enableAccountJetStream } = createRequire(__filename)(join(__dirname, '..', '..', 'scripts', 'nats-account.js')) as {
  enableAccountJetStream: (root: string, target: { url: string; creds: string; prefix: string }) => Promise<void>;
};

describe('npm start`s first connection to its own nats-server', () => {
  let dir: string;
  let child: ChildProcess | null = null;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'baton-start-nats-account-'));
  });
  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child?.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('enables the account`s JetStream once, alone: the four services connecting at once after it enable nothing, and the server logs no error', async () => {
    // What `baton nats-config` writes, on a fresh store; the server logs at debug level (it names each enabling).
    const deployment = openDeployment(join(dir, 'nats-auth'), 'acct');
    const creds = ensureServiceCreds(deployment);
    const port = await freePort();
    const config = writeServerConfig(deployment, { listen: `127.0.0.1:${port}`, storeDir: join(dir, 'store') });
    let log = '';
    const server = spawn('nats-server', ['-D', '-c', config], { stdio: ['ignore', 'pipe', 'pipe'] });
    child = server;
    server.stdout?.on('data', (chunk: Buffer) => (log += chunk.toString()));
    server.stderr?.on('data', (chunk: Buffer) => (log += chunk.toString()));
    await waitFor(() => log.includes('Server is ready') || undefined, 'nats-server ready', { timeoutMs: 10_000 });
    const url = `nats://127.0.0.1:${port}`;
    const enablings = () => log.split('\n').filter((line) => line.includes('Enabled JetStream for account')).length;
    expect(enablings()).toBe(0);

    await enableAccountJetStream(repoRoot(), { url, creds: creds['admin'] as string, prefix: deployment.prefix });
    expect(enablings()).toBe(1);

    // The services, all at once, each asking JetStream for the account's info as a service does at start.
    const services = await Promise.all(
      ServiceNames.map((service) => {
        const principal: Principal = { kind: 'svc', service };
        return connectNats({
          servers: url,
          credsFile: credsPath(deployment, principal),
          inboxPrefix: inboxPrefixOf(deployment.prefix, principal),
          reconnect: false,
        });
      }),
    );
    for (const handle of services) await handle.jsm.getAccountInfo();
    for (const handle of services) await handle.close();
    expect(enablings()).toBe(1);
    expect(log).not.toContain('[ERR]');
  });

  it('a server that is not there: the connection fails (npm start warns and starts the services anyway)', async () => {
    const deployment = openDeployment(join(dir, 'nobody'), 'acct');
    const creds = ensureServiceCreds(deployment);
    await expect(
      enableAccountJetStream(repoRoot(), { url: `nats://127.0.0.1:${await freePort()}`, creds: creds['admin'] as string, prefix: deployment.prefix }),
    ).rejects.toThrow();
  });
});
