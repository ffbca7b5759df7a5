import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { claimWithdrawnSubject, inboxPrefixOf, Principals, resultRefusedSubject, type Principal } from '@baton/contracts';
import {
  connectNats,
  createNkeyPair,
  credsFile,
  credsGrantResponses,
  decodeJwtClaims,
  issueCreds,
  jwtOfCreds,
  LedgerClient,
  openDeployment,
  permissionsFor,
  principalOfCreds,
  userJwt,
  type NatsHandle,
} from '@baton/eventstore';
import { createBatonClient, CredentialsRefused, PermissionDenied } from '@baton/sdk';
import { waitFor } from '@baton/wait';
import {
  freePort,
  permissionViolations,
  serviceCredsEnv,
  startAuthNatsServer,
  startService,
  stopService,
  waitReady,
  type AuthNatsServer,
} from '@baton/testing';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the `baton` command, in process
import { main as baton } from '../../apps/cli/src/main';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the `baton` command, in process
import { bufferedIo } from '../../apps/cli/src/output';

const PREFIX = 'baton';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

describe('NATS decentralized auth: the server, not the message, decides who is speaking', () => {
  let server: AuthNatsServer;
  const open: NatsHandle[] = [];

  beforeAll(async () => {
    server = await startAuthNatsServer(PREFIX);
  });
  afterAll(async () => {
    for (const handle of open) await handle.close().catch(() => undefined);
    await server.stop();
  });

  async function connectAs(principal: Principal): Promise<NatsHandle> {
    const issued = issueCreds(server.deployment, principal);
    const handle = await connectNats({
      servers: server.url,
      credsFile: issued.file,
      inboxPrefix: inboxPrefixOf(PREFIX, principal),
      reconnect: false,
      checkJetStream: principal.kind !== 'agent',
    });
    open.push(handle);
    return handle;
  }

  const violations = (handle: NatsHandle, act: () => void) => permissionViolations(handle, act);

  it('refuses a connection without credentials', async () => {
    await expect(connectNats({ servers: server.url, reconnect: false })).rejects.toThrow(/Authorization|AUTHORIZATION/i);
    // The SDK says which setting brings the credentials (NATS_CREDS unset in this process).
    const before = process.env['NATS_CREDS'];
    delete process.env['NATS_CREDS'];
    try {
      const missing = await createBatonClient({ natsUrl: server.url, prefix: PREFIX, project: 'acme', agent: 'support' }).catch((e: unknown) => e);
      expect(missing).toBeInstanceOf(CredentialsRefused);
      expect(missing).toMatchObject({
        code: 'unauthenticated',
        reason: 'missing',
        credsFile: null,
        message: expect.stringContaining('set NATS_CREDS to the file `baton creds agent` wrote'),
      });
    } finally {
      if (before !== undefined) process.env['NATS_CREDS'] = before;
    }
  });

  it('the SDK says why credentials do not let it in, with a code to branch on (unauthenticated) and the reason: refused, invalid, unreadable', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'baton-creds-'));
    try {
      const connectWith = (natsCreds: string) =>
        createBatonClient({ natsUrl: server.url, natsCreds, prefix: PREFIX, project: 'acme', agent: 'support' }).catch((e: unknown) => e);
      // Credentials another deployment issued (its own operator and account): this server refuses them.
      const stranger = issueCreds(openDeployment(join(dir, 'other-deployment'), PREFIX), Principals.agent('acme', 'support'));
      const refused = await connectWith(stranger.file);
      expect(refused).toBeInstanceOf(CredentialsRefused);
      expect(refused).toMatchObject({ name: 'CredentialsRefused', code: 'unauthenticated', reason: 'refused', credsFile: stranger.file });
      expect((refused as Error).message).toContain('retrying does not help');

      const garbage = join(dir, 'garbage.creds');
      writeFileSync(garbage, 'not a credentials file\n');
      await expect(connectWith(garbage)).resolves.toMatchObject({ code: 'unauthenticated', reason: 'invalid', credsFile: garbage });

      const absent = join(dir, 'absent.creds');
      await expect(connectWith(absent)).resolves.toMatchObject({ code: 'unauthenticated', reason: 'unreadable', credsFile: absent });
      // A server that cannot be reached is not a credentials problem: store_error, which a retry may fix.
      const closed = await freePort();
      await expect(
        createBatonClient({ natsUrl: `nats://127.0.0.1:${closed}`, natsCreds: stranger.file, prefix: PREFIX, project: 'acme', agent: 'support' }),
      ).rejects.toMatchObject({ code: 'store_error' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('admin credentials an earlier version issued with allow_responses: the CLI still connects with them and warns to issue new ones; current ones carry none', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'baton-old-admin-'));
    try {
      const run = async (creds: string) => {
        const io = bufferedIo();
        const code = await baton(['streams'], {
          io,
          env: { NATS_URL: server.url, NATS_CREDS: creds, BATON_PREFIX: PREFIX, BATON_NATS_DIR: join(dir, 'none') },
        });
        return { code, err: io.err() };
      };
      const current = issueCreds(server.deployment, Principals.operator('admin'));
      expect(credsGrantResponses(readFileSync(current.file, 'utf8'))).toBe(false);
      // No streams are provisioned on this server: the command itself ends `no stream` either way;
      // what matters is what it says about the credentials.
      const fresh = await run(current.file);
      expect(fresh.err).toContain('no stream');
      expect(fresh.err).not.toContain('allow_responses');

      const user = createNkeyPair('user');
      const old = join(dir, 'old-admin.creds');
      const granted = { ...permissionsFor(PREFIX, Principals.operator('admin')), allowResponses: true };
      writeFileSync(old, credsFile(userJwt(server.deployment.account, user, 'admin', granted, Math.floor(Date.now() / 1000)), user));
      expect(credsGrantResponses(readFileSync(old, 'utf8'))).toBe(true);
      const warned = await run(old);
      expect(warned.code).toBe(fresh.code);
      expect(warned.err).toContain(`the credentials in ${old} carry allow_responses`);
      expect(warned.err).toContain('baton creds admin --rotate');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('issues user JWTs signed by the account with the principal in their name', () => {
    const issued = issueCreds(server.deployment, Principals.agent('acme', 'support'));
    const claims = decodeJwtClaims(jwtOfCreds(readFileSync(issued.file, 'utf8')));
    expect(claims['iss']).toBe(server.deployment.account.publicKey);
    expect(claims['name']).toBe('agent:acme:support');
    // Its results go through its edge (the ledger relays them): nothing JetStream answers.
    expect((claims['nats'] as { pub: { allow: string[] } }).pub.allow).toContain('baton.edge.acme.result.support');
    expect((claims['nats'] as { pub: { allow: string[] } }).pub.allow.filter((s) => s.startsWith('baton.in.') || s.startsWith('$JS.'))).toEqual([]);
  });

  it('a credentials file names its principal (agent, service, admin); a file Baton did not issue names none', () => {
    const read = (principal: Principal) => principalOfCreds(readFileSync(issueCreds(server.deployment, principal).file, 'utf8'));
    expect(read(Principals.agent('acme', 'support'))).toEqual(Principals.agent('acme', 'support'));
    expect(read(Principals.service('ledger'))).toEqual(Principals.service('ledger'));
    expect(read(Principals.operator('admin'))).toEqual(Principals.operator('admin'));
    expect(principalOfCreds('not a creds file')).toBeNull();
  });

  it("baton result with an agent's credentials publishes on the agent's own result subject through its edge, relayed by the ledger (the CLI replies on the agent's inbox)", async () => {
    const admin = await connectAs(Principals.operator('admin'));
    // The ledger provisions the streams as it starts.
    const ledger = startService('ledger', await freePort(), {
      NATS_URL: server.url,
      REDIS_URL,
      BATON_PREFIX: PREFIX,
      LOG_LEVEL: 'warn',
      ...serviceCredsEnv(server)('ledger'),
    });
    await waitReady(ledger);
    const dir = mkdtempSync(join(tmpdir(), 'baton-result-'));
    try {
      const file = join(dir, 'result.json');
      writeFileSync(
        file,
        JSON.stringify({
          result_id: 'res-cli',
          run_id: 'r',
          project: 'acme',
          workflow_run_id: 'wr-1',
          agent: 'support',
          body: 'done',
          handoff_id: 'h-1',
          claim_id: 'c-1',
        }),
      );
      const io = bufferedIo();
      const env = { NATS_URL: server.url, NATS_CREDS: issueCreds(server.deployment, Principals.agent('acme', 'support')).file, BATON_PREFIX: PREFIX };
      const code = await baton(['result', file, '--json'], { io, env });
      expect({ code, err: io.err() }).toEqual({ code: 0, err: '' });
      expect(JSON.parse(io.out())).toMatchObject({ duplicate: false });
      const stored = await admin.jsm.streams.getMessage(`${PREFIX.toUpperCase()}_INBOX`, { last_by_subj: `${PREFIX}.in.acme.result.support` });
      expect(JSON.parse(new TextDecoder().decode(stored.data))).toMatchObject({ result_id: 'res-cli', agent: 'support' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await stopService(ledger);
    }
  });

  it("lets an agent publish its own result on its edge but nothing into a stream (its own result subject included), nor another agent's edge, an event or an operator answer", async () => {
    const agent = await connectAs(Principals.agent('acme', 'support'));
    const denied = await violations(agent, () => {
      agent.connection.publish('baton.in.acme.result.support', new Uint8Array());
      agent.connection.publish('baton.in.acme.result.billing', new Uint8Array());
      agent.connection.publish('baton.edge.acme.result.billing', new Uint8Array());
      agent.connection.publish('baton.ev.acme.run.r1', new Uint8Array());
      agent.connection.publish('baton.in.acme.answer', new Uint8Array());
      agent.connection.publish('baton.in.other.result.support', new Uint8Array());
      agent.connection.publish('baton.dlq.router', new Uint8Array());
    });
    expect(denied.sort()).toEqual([
      'publish baton.dlq.router',
      'publish baton.edge.acme.result.billing',
      'publish baton.ev.acme.run.r1',
      'publish baton.in.acme.answer',
      'publish baton.in.acme.result.billing',
      'publish baton.in.acme.result.support',
      'publish baton.in.other.result.support',
    ]);
    const allowed = await violations(agent, () => agent.connection.publish('baton.edge.acme.result.support', new Uint8Array()));
    expect(allowed).toEqual([]);
  });

  it("an SDK client publishing where its credentials may not (another agent's result subject) gets PermissionDenied, code permission_denied, at once — not a publish timeout", async () => {
    const handle = await connectAs(Principals.agent('acme', 'support'));
    const impostor = await createBatonClient({ nats: handle, prefix: PREFIX, project: 'acme', agent: 'billing' });
    const started = Date.now();
    const refusal = await impostor
      .publishResult({ run_id: 'r-1', workflow_run_id: 'wr-1', result_id: 'res-1', handoff_id: 'h-1', claim_id: 'c-1', body: 'done' })
      .then(
        () => null,
        (error: unknown) => error,
      );
    expect(refusal).toBeInstanceOf(PermissionDenied);
    expect(refusal).toMatchObject({ code: 'permission_denied', subject: `${PREFIX}.in.acme.result.billing` });
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("a ledger command on another principal's subject is refused permission_denied (kind forbidden) at once, not retried into a timeout; baton pause with an agent's credentials says to use the admin's", async () => {
    const handle = await connectAs(Principals.agent('acme', 'support'));
    const impostor = new LedgerClient(handle, PREFIX, { as: Principals.operator('admin'), timeoutMs: 5000 });
    const started = Date.now();
    const reply = await impostor.pause('acme', { reason: 'not mine to pause', idempotency_key: 'pause-imp' });
    expect(reply).toMatchObject({ ok: false, error: { code: 'permission_denied', kind: 'forbidden' } });
    expect(Date.now() - started).toBeLessThan(2000);

    const io = bufferedIo();
    const env = { NATS_URL: server.url, NATS_CREDS: issueCreds(server.deployment, Principals.agent('acme', 'support')).file, BATON_PREFIX: PREFIX };
    const code = await baton(['pause', 'acme', '--reason', 'not mine', '--json'], { io, env });
    expect(code).toBe(1);
    expect(io.out()).toBe('');
    const { error } = JSON.parse(io.err()) as { error: { code: string; message: string } };
    expect(error.code).toBe('permission_denied');
    expect(error.message).toContain(`may not publish to ${PREFIX}.cmd.ledger.acme.op.admin.pause: use the admin's`);
  });

  it("baton with an agent's credentials where an admin's are needed: permission_denied saying whose to use (project, run, dlq list: the admin's; result of another agent: that agent's or the admin's)", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'baton-cli-agent-'));
    try {
      const env = { NATS_URL: server.url, NATS_CREDS: issueCreds(server.deployment, Principals.agent('shop', 'support')).file, BATON_PREFIX: PREFIX };
      const run = async (...argv: string[]) => {
        const io = bufferedIo();
        const code = await baton(argv, { io, env: { ...env, BATON_NATS_DIR: join(dir, 'none') } });
        return { code, out: io.out(), err: io.err() };
      };
      for (const argv of [
        ['project', 'shop'],
        ['run', 'wr-1', '--project', 'shop'],
        ['run', 'wr-1'],
        ['dlq', 'list'],
      ]) {
        const typed = await run(...argv, '--json');
        expect({ argv, code: typed.code, out: typed.out }).toEqual({ argv, code: 1, out: '' });
        const { error } = JSON.parse(typed.err) as { error: { code: string; message: string } };
        expect({ argv, code: error.code, hint: /use the admin's/.test(error.message) }).toEqual({ argv, code: 'permission_denied', hint: true });
      }
      const file = join(dir, 'result.json');
      writeFileSync(
        file,
        JSON.stringify({
          result_id: 'res-1',
          run_id: 'r',
          project: 'billing',
          workflow_run_id: 'wr-1',
          agent: 'payer',
          body: 'done',
          handoff_id: 'h-1',
          claim_id: 'c-1',
        }),
      );
      const typed = await run('result', file, '--json');
      expect(typed.code).toBe(1);
      expect(JSON.parse(typed.err)).toMatchObject({
        error: {
          code: 'permission_denied',
          message: expect.stringContaining(
            "publish it with agent payer's own credentials (`baton creds agent --project billing --agent payer`) or the admin's",
          ),
        },
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('an SDK client reading a handoff from the event stream (ledger.get) with agent credentials gets PermissionDenied, code permission_denied: not a store error to parse', async () => {
    const issued = issueCreds(server.deployment, Principals.agent('acme', 'support'));
    const agent = await createBatonClient({ natsUrl: server.url, natsCreds: issued.file, prefix: PREFIX, project: 'acme', agent: 'support' });
    try {
      const refusal = await agent.ledger.get('acme', 'h-1').then(
        () => null,
        (error: unknown) => error,
      );
      expect(refusal).toBeInstanceOf(PermissionDenied);
      expect(refusal).toMatchObject({ code: 'permission_denied', operation: 'publish to', subject: expect.stringMatching(/STREAM\.MSG\.GET\.BATON_EVENTS$/) });
    } finally {
      await agent.close();
    }
  });

  it('an SDK client made for another agent than its credentials name is refused at connect (PermissionDenied, subscribe to its inbox): nothing is sent, no start is stored behind an error', async () => {
    const issued = issueCreds(server.deployment, Principals.agent('acme', 'support'));
    const refused = await createBatonClient({ natsUrl: server.url, natsCreds: issued.file, prefix: PREFIX, project: 'acme', agent: 'billing' }).then(
      () => null,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(PermissionDenied);
    expect(refused).toMatchObject({ code: 'permission_denied', operation: 'subscribe to', subject: `_INBOX_${PREFIX}.agent.acme.billing.>` });
    expect((refused as Error).message).toContain('agent:acme:support');
    // Another project, same agent name: refused the same way.
    await expect(createBatonClient({ natsUrl: server.url, natsCreds: issued.file, prefix: PREFIX, project: 'other', agent: 'support' })).rejects.toBeInstanceOf(
      PermissionDenied,
    );
    // Its own project and agent under another deployment prefix: refused, and told the prefix is what differs.
    const prefixed = await createBatonClient({ natsUrl: server.url, natsCreds: issued.file, prefix: 'nope', project: 'acme', agent: 'support' }).then(
      () => null,
      (error: unknown) => error,
    );
    expect(prefixed).toBeInstanceOf(PermissionDenied);
    expect((prefixed as Error).message).toContain(`issued for the deployment prefix '${PREFIX}', and the client asked for 'nope'`);
    expect((refused as Error).message).not.toContain('deployment prefix');
    // Its own project and agent: connects.
    const own = await createBatonClient({ natsUrl: server.url, natsCreds: issued.file, prefix: PREFIX, project: 'acme', agent: 'support' });
    await own.close();
  });

  it('refuses an agent a subscription to _INBOX.> or to any <prefix>.agent subject, its own included (nothing is published there any more)', async () => {
    const agent = await connectAs(Principals.agent('acme', 'support'));
    const denied = await violations(agent, () => {
      agent.connection.subscribe('_INBOX.>');
      agent.connection.subscribe('baton.agent.other.support.>');
      agent.connection.subscribe('baton.agent.acme.support.>');
    });
    expect(denied.sort()).toEqual(['subscription _INBOX.>', 'subscription baton.agent.acme.support.>', 'subscription baton.agent.other.support.>']);
  });

  it("a claim-withdrawn notice reaches only the agent it names, and only Baton's services write one: the ledger publishes it, the agent reads its own, no agent can write or read another's", async () => {
    const ledger = await connectAs(Principals.service('ledger'));
    const support = await connectAs(Principals.agent('acme', 'support'));
    const billing = await connectAs(Principals.agent('acme', 'billing'));
    const subject = claimWithdrawnSubject(PREFIX, 'acme', 'support');
    const heard: string[] = [];
    support.connection.subscribe(subject, { callback: (_err, msg) => heard.push(new TextDecoder().decode(msg.data)) });
    await support.connection.flush();
    ledger.connection.publish(subject, new TextEncoder().encode('{"from":"ledger"}'));
    await ledger.connection.flush();
    await waitFor(() => heard.length === 1, 'the notice at the agent');
    expect(heard).toEqual(['{"from":"ledger"}']);
    const denied = await violations(billing, () => {
      billing.connection.subscribe(subject);
      billing.connection.publish(subject, new Uint8Array());
      billing.connection.publish(claimWithdrawnSubject(PREFIX, 'acme', 'billing'), new Uint8Array());
    });
    expect(denied.sort()).toEqual([`publish ${claimWithdrawnSubject(PREFIX, 'acme', 'billing')}`, `publish ${subject}`, `subscription ${subject}`]);
    expect(heard).toHaveLength(1);
  });

  it("a refused-result notice reaches only the agent it names: the router publishes it, the agent reads its own, no agent can write or read another's", async () => {
    const router = await connectAs(Principals.service('router'));
    const support = await connectAs(Principals.agent('acme', 'support'));
    const billing = await connectAs(Principals.agent('acme', 'billing'));
    const subject = resultRefusedSubject(PREFIX, 'acme', 'support');
    const heard: string[] = [];
    support.connection.subscribe(subject, { callback: (_err, msg) => heard.push(new TextDecoder().decode(msg.data)) });
    await support.connection.flush();
    router.connection.publish(subject, new TextEncoder().encode('{"from":"router"}'));
    await router.connection.flush();
    await waitFor(() => heard.length === 1, 'the notice at the agent');
    expect(heard).toEqual(['{"from":"router"}']);
    const denied = await violations(billing, () => {
      billing.connection.subscribe(subject);
      billing.connection.publish(subject, new Uint8Array());
      billing.connection.publish(resultRefusedSubject(PREFIX, 'acme', 'billing'), new Uint8Array());
    });
    expect(denied.sort()).toEqual([`publish ${resultRefusedSubject(PREFIX, 'acme', 'billing')}`, `publish ${subject}`, `subscription ${subject}`]);
    expect(heard).toHaveLength(1);
  });

  it('gives each service its own inbox prefix and request replies through it', async () => {
    const ledger = await connectAs(Principals.service('ledger'));
    const router = await connectAs(Principals.service('router'));
    const sub = ledger.connection.subscribe('baton.cmd.ledger.>', {
      callback: (_err, msg) => msg.respond(new TextEncoder().encode('ok')),
    });
    await ledger.connection.flush();
    const reply = await router.connection.request('baton.cmd.ledger.acme.svc.router.create', new Uint8Array(), { timeout: 2000 });
    expect(new TextDecoder().decode(reply.data)).toBe('ok');
    sub.unsubscribe();
  });
});
