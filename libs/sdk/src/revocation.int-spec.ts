import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Principals } from '@baton/contracts';
import { ensureServiceCreds, issueCreds, openDeployment, revokeUsers, writeServerConfig, type AuthDeployment } from '@baton/eventstore';
// Test only: a nats-server of this spec's own, which it restarts.
// eslint-disable-next-line @nx/enforce-module-boundaries
import { freePort, startNatsServer, type PrivateNatsServer } from '../../eventstore/src/int/servers';
import { ConnectionClosed, createBatonClient, type BatonAgent, type ConnectionEvent } from './index';

/*
 * The close reason of a revoked agent does not depend on how the revocation reached its connection.
 * A server that applies a revocation while the agent is connected to it says so
 * (`-ERR 'User Authentication Revoked'`); every connect after that, on any server that applied it,
 * is refused with the same `Authorization Violation` as unknown credentials. On a cluster revoked
 * node by node the agent's reconnects land on nodes in any order — one that has not applied it yet
 * takes it back, then refuses it without a word once it has (a restart, a reload racing the
 * reconnect) — so whether the agent heard the server's words is luck. One private nats-server
 * plays that here: the revocation is applied by a restart, which never tells the open connection.
 */

describe('a revoked agent’s connection closes credentials_revoked however the revocation reached it (a private authenticated nats-server)', () => {
  const prefix = `rv${randomBytes(4).toString('hex')}`;
  const dir = mkdtempSync(join(tmpdir(), 'baton-sdk-revocation-'));
  let deployment: AuthDeployment;
  let server: PrivateNatsServer;
  const agents: BatonAgent[] = [];

  /** A connected agent with its own copy of fresh credentials (a revocation removes the deployment folder's file), and its user key. */
  const connectAgent = async (agent: string) => {
    const issued = issueCreds(deployment, Principals.agent('shop', agent));
    const file = join(dir, `${agent}.creds`);
    copyFileSync(issued.file, file);
    const client = await createBatonClient({ natsUrl: server.url, natsCreds: file, prefix, project: 'shop', agent });
    agents.push(client);
    const heard: ConnectionEvent[] = [];
    // Ends after the `closed` event: `heard` then holds every event of the connection.
    const ended = (async () => {
      for await (const event of client.connectionEvents()) heard.push(event);
    })();
    return { client, user: issued.userPublicKey, heard, ended };
  };

  beforeAll(async () => {
    deployment = openDeployment(join(dir, 'nats-auth'), prefix);
    ensureServiceCreds(deployment);
    const port = await freePort();
    const config = writeServerConfig(deployment, { listen: `127.0.0.1:${port}`, storeDir: join(dir, 'js') });
    server = await startNatsServer({ port, config });
  }, 30_000);

  afterAll(async () => {
    for (const agent of agents) await agent.close({ timeoutMs: 0 }).catch(() => undefined);
    await server?.remove();
    rmSync(dir, { recursive: true, force: true });
  });

  it('applied while it is connected (a reload: the server says "User Authentication Revoked"): credentials_revoked', async () => {
    const { client, user, heard, ended } = await connectAgent('told');
    revokeUsers(deployment, [user]);
    await server.reload();
    const closed = await client.closed;
    await ended;
    expect(closed).toBeInstanceOf(ConnectionClosed);
    expect(closed).toMatchObject({ code: 'connection_closed', reason: 'credentials_revoked' });
    expect(heard).toEqual(
      expect.arrayContaining([expect.objectContaining({ kind: 'server_error', about: 'credentials_ended', said: expect.stringMatching(/revoked/i) })]),
    );
  }, 30_000);

  it('applied while it is away (a restart: its reconnects are only refused, "Authorization Violation"): credentials_revoked all the same', async () => {
    const { client, user, heard, ended } = await connectAgent('untold');
    await server.kill();
    revokeUsers(deployment, [user]);
    await server.start();
    const closed = await client.closed;
    await ended;
    expect(closed).toBeInstanceOf(ConnectionClosed);
    // The server never said "revoked" to this connection: only refused its reconnects.
    expect(heard.filter((event) => event.kind === 'server_error' && event.about === 'credentials_ended')).toEqual([]);
    expect(heard).toEqual(expect.arrayContaining([expect.objectContaining({ kind: 'server_error', about: 'credentials_refused' })]));
    expect(closed).toMatchObject({ code: 'connection_closed', reason: 'credentials_revoked', natsCode: 'AUTHORIZATION_VIOLATION' });
    expect((closed as ConnectionClosed).message).toMatch(/no longer accepts/);
  }, 30_000);

  it('credentials_refused is left for a file rewritten with credentials no server accepted on the connection (another deployment’s)', async () => {
    const { client } = await connectAgent('swapped');
    // Not revoked: the file now holds another deployment's credentials for the same agent.
    const other = openDeployment(join(dir, 'other-auth'), prefix);
    copyFileSync(issueCreds(other, Principals.agent('shop', 'swapped')).file, join(dir, 'swapped.creds'));
    await server.kill();
    await server.start();
    const closed = await client.closed;
    expect(closed).toBeInstanceOf(ConnectionClosed);
    expect(closed).toMatchObject({ code: 'connection_closed', reason: 'credentials_refused', natsCode: 'AUTHORIZATION_VIOLATION' });
  }, 30_000);
});
