import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inboxPrefixOf, Principals, type Principal } from '@baton/contracts';
import { connectNats, credsPath, decodeJwtClaims, type NatsHandle } from '@baton/eventstore';
import { startAuthNatsServer, waitFor, type AuthNatsServer } from '@baton/testing';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the `baton` command, in process
import { main } from '../../apps/cli/src/main';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the `baton` command, in process
import { bufferedIo } from '../../apps/cli/src/output';

/*
 * `baton creds revoke` against the nats-server of this machine (2.9.10), configured from the
 * deployment folder as `baton nats-config` writes it. What was measured there and is held here: a
 * configuration reload (SIGHUP) reads the re-signed BATON account JWT from resolver_preload, closes
 * the revoked user's open connection ("User Authentication Revoked") and refuses its new ones,
 * while credentials issued after the revocation (a new user key) connect. Until the reload, the
 * server still accepts the revoked credentials: the reload is the step that applies a revocation.
 */

const PREFIX = 'baton';
const SUPPORT = Principals.agent('acme', 'support');

describe('revoking an agent’s NATS credentials: baton creds revoke, then a reload of nats-server', () => {
  let server: AuthNatsServer;
  let kept: string;
  const open: NatsHandle[] = [];

  beforeAll(async () => {
    server = await startAuthNatsServer(PREFIX);
    kept = mkdtempSync(join(tmpdir(), 'baton-revoked-'));
  });
  afterAll(async () => {
    for (const handle of open) await handle.close().catch(() => undefined);
    await server.stop();
    rmSync(kept, { recursive: true, force: true });
  });

  async function baton<T>(...argv: string[]): Promise<T> {
    const io = bufferedIo();
    const code = await main([...argv, '--json'], { io, env: { BATON_PREFIX: PREFIX, BATON_NATS_DIR: server.deployment.dir } });
    if (code !== 0) throw new Error(`baton ${argv.join(' ')} exited ${code}: ${io.err()}`);
    return JSON.parse(io.out()) as T;
  }

  type Issued = { file: string; user: string; still_valid: string[]; revoked?: { user: string; already_revoked: boolean }[] };
  type Revoked = { revoked: { user: string; principal: string; already_revoked: boolean }[]; removed_files: string[] };

  /** A copy of the file `baton creds` wrote (revoking removes it from the deployment folder), as the agent would hold it. */
  function agentCopy(file: string, name: string): string {
    const copy = join(kept, name);
    copyFileSync(file, copy);
    return copy;
  }

  async function connectAs(file: string, principal: Principal = SUPPORT, reconnect = false): Promise<NatsHandle> {
    const handle = await connectNats({
      servers: server.url,
      credsFile: file,
      inboxPrefix: inboxPrefixOf(PREFIX, principal),
      reconnect,
      checkJetStream: principal.kind !== 'agent',
    });
    open.push(handle);
    return handle;
  }

  it('closes the revoked agent’s open connection and refuses its credentials after the reload; credentials issued after the revocation connect', async () => {
    const first = await baton<Issued>('creds', 'agent', '--project', 'acme', '--agent', 'support');
    const old = agentCopy(first.file, 'support-old.creds');
    const held = await connectAs(old);
    await held.connection.flush();

    const revoked = await baton<Revoked>('creds', 'revoke', '--project', 'acme', '--agent', 'support');
    expect(revoked.revoked).toEqual([
      { user: first.user, principal: 'agent:acme:support', issued_at: expect.any(String), revoked_at: expect.any(String), already_revoked: false },
    ]);
    expect(revoked.removed_files).toEqual([first.file]);
    expect(existsSync(first.file)).toBe(false);
    // The account JWT the server will read lists the user.
    const preload =
      new RegExp(`^  ${server.deployment.account.publicKey}: (\\S+)$`, 'm').exec(readFileSync(join(server.deployment.dir, 'nats-server.conf'), 'utf8'))?.[1] ??
      '';
    expect((decodeJwtClaims(preload)['nats'] as { revocations?: Record<string, number> }).revocations).toHaveProperty(first.user);

    // Written, not applied: the running server still accepts the credentials.
    await (await connectAs(old)).close();
    expect(held.connection.isClosed()).toBe(false);

    await server.reload();
    // The open connection is closed by the server, and the credentials no longer connect.
    await expect(held.closed).resolves.toMatchObject({ message: expect.stringMatching(/User Authentication Revoked/i) });
    await expect(connectAs(old)).rejects.toThrow(/Authorization Violation/i);

    // The same agent, issued again after the revocation: a new user key, which connects.
    const fresh = await baton<Issued>('creds', 'agent', '--project', 'acme', '--agent', 'support');
    expect(fresh.user).not.toBe(first.user);
    expect(fresh.still_valid).toEqual([]);
    const again = await connectAs(fresh.file);
    await again.connection.flush();
    await expect(connectAs(old)).rejects.toThrow(/Authorization Violation/i);
  });

  it('--rotate: the new file connects, the one it replaced is refused once the server reloads, and a service connection comes back by itself', async () => {
    const before = await baton<Issued>('creds', 'agent', '--project', 'acme', '--agent', 'builder');
    const builder = Principals.agent('acme', 'builder');
    const old = agentCopy(before.file, 'builder-old.creds');
    // Issued again without --rotate: the earlier key is named as still valid, and it does connect.
    const twice = await baton<Issued>('creds', 'agent', '--project', 'acme', '--agent', 'builder');
    expect(twice.still_valid).toEqual([before.user]);
    await (await connectAs(old, builder)).close();

    const rotated = await baton<Issued>('creds', 'agent', '--project', 'acme', '--agent', 'builder', '--rotate');
    expect(rotated.still_valid).toEqual([]);
    expect(rotated.revoked?.map((entry) => entry.user).sort()).toEqual([before.user, twice.user].sort());
    const admin = await connectAs(credsPath(server.deployment, Principals.operator('admin')), Principals.operator('admin'), true);

    await server.reload();
    await expect(connectAs(old, builder)).rejects.toThrow(/Authorization Violation/i);
    await (await connectAs(rotated.file, builder)).connection.flush();
    // nats-server 2.9.10 closes every client's connection on a reload; one that reconnects (as
    // Baton's services and the SDK do) is back without anyone doing anything.
    await waitFor(() => admin.connection.flush().then(() => true), 'the admin connection to answer after the reload');
    expect(admin.connection.isClosed()).toBe(false);
  });

  it('baton nats-config run again keeps the operator JWT and the revocations: the server reloads it, and the revoked credentials stay refused', async () => {
    const issued = await baton<Issued>('creds', 'agent', '--project', 'acme', '--agent', 'payer');
    const payer = Principals.agent('acme', 'payer');
    const old = agentCopy(issued.file, 'payer-old.creds');
    await baton<Revoked>('creds', 'revoke', '--user', issued.user);
    const operatorLine = (text: string) => /^operator: (\S+)$/m.exec(text)?.[1];
    const conf = join(server.deployment.dir, 'nats-server.conf');
    const operatorBefore = operatorLine(readFileSync(conf, 'utf8'));

    const listen = /^listen: "(.+)"$/m.exec(readFileSync(conf, 'utf8'))?.[1] ?? '';
    const store = /store_dir: "(.+)"/.exec(readFileSync(conf, 'utf8'))?.[1] ?? '';
    await baton('nats-config', '--listen', listen, '--store-dir', store);
    expect(operatorLine(readFileSync(conf, 'utf8'))).toBe(operatorBefore);
    // A changed operator JWT would make nats-server refuse the whole reload (reload() rejects then).
    await server.reload();
    await expect(connectAs(old, payer)).rejects.toThrow(/Authorization Violation/i);
  });

  it('baton nats-config run again WITHOUT --listen / --store-dir (the upgrade notes’ step) keeps the running server’s: the reload after a revocation applies, and the revoked copy is refused', async () => {
    const conf = join(server.deployment.dir, 'nats-server.conf');
    const listeners = () =>
      readFileSync(conf, 'utf8')
        .split('\n')
        .filter((line) => /^\s*(listen|http|store_dir):/.test(line));
    const started = listeners();
    // The server's own port and JetStream folder, not nats-config's defaults (127.0.0.1:4222, <dir>/jetstream).
    expect(started[0]).toBe(`listen: "127.0.0.1:${server.port}"`);

    const summary = await baton<{ listen: string; changed: unknown[] }>('nats-config');
    expect(summary).toMatchObject({ listen: `127.0.0.1:${server.port}`, changed: [] });
    expect(listeners()).toEqual(started);

    const issued = await baton<Issued>('creds', 'agent', '--project', 'loans', '--agent', 'Loan_Supervisor');
    const supervisor = Principals.agent('loans', 'Loan_Supervisor');
    const old = agentCopy(issued.file, 'supervisor-old.creds');
    await (await connectAs(old, supervisor)).close();
    await baton<Revoked>('creds', 'revoke', '--project', 'loans', '--agent', 'Loan_Supervisor');
    // Rejects with the server's words if it refused the reload (a changed listen or store_dir).
    await server.reload();
    await expect(connectAs(old, supervisor)).rejects.toThrow(/Authorization Violation/i);
  });
});
