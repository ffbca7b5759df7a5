import { readFileSync } from 'node:fs';
import { inboxPrefixOf, Principals } from '@baton/contracts';
import { batonTopology, ConnectionClosed, connectNats, credsPath, provision, type NatsHandle } from '@baton/eventstore';
import { BaseConfigSchema, createRuntime, loadConfig, type ServiceRuntime } from '@baton/platform';
import { startAuthNatsServer, waitFor, type AuthNatsServer } from '@baton/testing';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the `baton` command, in process
import { main } from '../../apps/cli/src/main';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the `baton` command, in process
import { bufferedIo } from '../../apps/cli/src/output';

/*
 * Credentials rotated under a running service, against the nats-server of this machine (2.9.10)
 * configured as `baton nats-config` writes it. `baton creds service <s> --rotate` writes the new
 * file where the old one was; the reload revokes the old key and closes the connection using it.
 * The client reads the file again at every reconnect, so a service given the path (NATS_CREDS)
 * comes back with the new credentials by itself. Revoked with no new file, the client gives up on
 * the connection: its `closed` says why (typed), and a service's runtime is told to exit.
 */

const PREFIX = 'baton';

describe('a service connection across credential rotation and revocation (a real nats-server, reloaded)', () => {
  let server: AuthNatsServer;
  const open: NatsHandle[] = [];

  beforeAll(async () => {
    server = await startAuthNatsServer(PREFIX);
    const admin = await connectNats({ servers: server.url, credsFile: credsPath(server.deployment, Principals.operator('admin')), reconnect: false });
    try {
      // As the services provision them (file storage): createRuntime below finds them as it wants them.
      await provision(admin.jsm, batonTopology(PREFIX));
    } finally {
      await admin.close();
    }
  });
  afterAll(async () => {
    for (const handle of open) await handle.close().catch(() => undefined);
    await server.stop();
  });

  async function baton<T>(...argv: string[]): Promise<T> {
    const io = bufferedIo();
    const code = await main([...argv, '--json'], { io, env: { BATON_PREFIX: PREFIX, BATON_NATS_DIR: server.deployment.dir } });
    if (code !== 0) throw new Error(`baton ${argv.join(' ')} exited ${code}: ${io.err()}`);
    return JSON.parse(io.out()) as T;
  }

  type Issued = { file: string; user: string; revoked?: { user: string }[] };

  it('--rotate writes the new file at the same path; after the reload the connection reconnects with it and publishes', async () => {
    const router = Principals.service('router');
    const file = credsPath(server.deployment, router);
    const before = readFileSync(file, 'utf8');
    const handle = await connectNats({ servers: server.url, credsFile: file, inboxPrefix: inboxPrefixOf(PREFIX, router), reconnect: true });
    open.push(handle);
    await handle.js.publish(`${PREFIX}.ev.acme.run.r-before`, new TextEncoder().encode('{}'));

    const rotated = await baton<Issued>('creds', 'service', 'router', '--rotate');
    // What the service was given (NATS_CREDS) now holds the new credentials.
    expect(rotated.file).toBe(file);
    expect(readFileSync(file, 'utf8')).not.toBe(before);
    expect(rotated.revoked?.length).toBeGreaterThan(0);

    await server.reload();
    // The reload closes the connection of the revoked key; the client reconnects, reading the
    // file again, and the new key is let in: a publish (and its ack) goes through.
    await waitFor(
      () =>
        handle.js
          .publish(`${PREFIX}.ev.acme.run.r-after`, new TextEncoder().encode('{}'), { timeout: 1000 })
          .then((ack) => ack.seq > 0)
          .catch(() => false),
      'a publish on the reconnected connection',
      { timeoutMs: 15_000 },
    );
    expect(handle.connection.isClosed()).toBe(false);
  });

  it('revoked with no new file: the client gives up, and closed resolves with ConnectionClosed (credentials_revoked, the file named)', async () => {
    const watchdog = Principals.service('watchdog');
    const file = credsPath(server.deployment, watchdog);
    const handle = await connectNats({ servers: server.url, credsFile: file, inboxPrefix: inboxPrefixOf(PREFIX, watchdog), reconnect: true });
    open.push(handle);
    await handle.connection.flush();

    // revoke removes the file that holds the revoked key: the client keeps presenting what it read last.
    await baton('creds', 'revoke', '--service', 'watchdog');
    await server.reload();
    const closed = await Promise.race([handle.closed, new Promise<'open'>((resolve) => setTimeout(() => resolve('open'), 15_000))]);
    expect(closed).toBeInstanceOf(ConnectionClosed);
    expect(closed).toMatchObject({ code: 'connection_closed', reason: 'credentials_revoked', credsFile: file });
    expect((closed as ConnectionClosed).message).toMatch(/revoked/i);
  });

  it('the service runtime on revoked credentials: an error line naming the reason, then its onClosed (a service exits non-zero); a drain on purpose is no loss', async () => {
    const ledgerFile = credsPath(server.deployment, Principals.service('ledger'));
    const config = loadConfig(BaseConfigSchema, { NATS_URL: server.url, NATS_CREDS: ledgerFile, BATON_PREFIX: PREFIX, LOG_LEVEL: 'info' });
    const lines: string[] = [];
    const stdout = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => (lines.push(String(chunk)), true));
    const stderr = jest.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => (lines.push(String(chunk)), true));
    const closedWith: ConnectionClosed[] = [];
    let runtime: ServiceRuntime | undefined;
    let stopping = false;
    try {
      runtime = await createRuntime({
        service: 'ledger',
        config,
        redis: false,
        connectionClosed: { stopping: () => stopping, onClosed: (error) => closedWith.push(error) },
      });
      // The notifier's runtime, drained on purpose: nothing is reported.
      const notifierConfig = loadConfig(BaseConfigSchema, {
        NATS_URL: server.url,
        NATS_CREDS: credsPath(server.deployment, Principals.service('notifier')),
        BATON_PREFIX: PREFIX,
      });
      let notifierClosed = 0;
      const notifier = await createRuntime({
        service: 'notifier',
        config: notifierConfig,
        redis: false,
        connectionClosed: { stopping: () => stopping, onClosed: () => notifierClosed++ },
      });
      stopping = true;
      await notifier.nats.drain();
      stopping = false;

      await baton('creds', 'revoke', '--service', 'ledger');
      await server.reload();
      await waitFor(() => closedWith.length > 0, 'the runtime told of the closed connection', { timeoutMs: 15_000 });
      expect(closedWith[0]).toMatchObject({ reason: 'credentials_revoked' });
      expect(notifierClosed).toBe(0);
    } finally {
      stdout.mockRestore();
      stderr.mockRestore();
      await runtime?.nats.close();
    }
    const logged = lines
      .flatMap((chunk) => chunk.split('\n'))
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line['service'] === 'ledger');
    // The server's -ERR first, with its words (the client's status carries only NATS_PROTOCOL_ERR).
    expect(logged.filter((line) => line['level'] === 'warn' && String(line['msg']).startsWith('NATS server ended'))).toEqual([
      expect.objectContaining({ nats_code: 'NATS_PROTOCOL_ERR', said: expect.stringMatching(/revoked/i) }),
    ]);
    // Its reconnects refused, each a warn; the one error is the close.
    expect(logged).toContainEqual(
      expect.objectContaining({ level: 'warn', msg: 'NATS server refused these credentials on reconnect', nats_code: 'AUTHORIZATION_VIOLATION' }),
    );
    const errors = logged.filter((line) => line['level'] === 'error');
    expect(errors).toEqual([
      expect.objectContaining({
        msg: expect.stringMatching(/^NATS connection closed for good \(credentials_revoked\): .*revoked/),
        reason: 'credentials_revoked',
        creds_file: ledgerFile,
      }),
    ]);
  });
});
