import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Principals } from '@baton/contracts';
import {
  batonTopology,
  connectNats,
  createNkeyPair,
  credsFile,
  ensureServiceCreds,
  issueCreds,
  openDeployment,
  permissionsFor,
  provision,
  userJwt,
  writeServerConfig,
} from '@baton/eventstore';
// eslint-disable-next-line @nx/enforce-module-boundaries
import { freePort, startNatsServer, type PrivateNatsServer } from '../../../libs/eventstore/src/int/servers';
import { main } from './main';
import { bufferedIo } from './output';

/** Stop a nats-server this spec started, and remove its folder. */
async function stopServer(server: PrivateNatsServer | undefined, dir: string): Promise<void> {
  await server?.remove();
  await rm(dir, { recursive: true, force: true });
}

/**
 * NATS that is reached and refuses the credentials is not "unavailable": retrying does not help,
 * other credentials do. The CLI says `unauthenticated`, names what it presented (NATS_CREDS's file,
 * or that NATS_CREDS is unset) and what to do. A real nats-server that requires a user and a
 * password refuses every credentials file and a connection with none.
 */
describe('baton against a NATS server that refuses its credentials (a real nats-server requiring auth)', () => {
  let server: PrivateNatsServer | undefined;
  let url: string;
  let dir: string;

  async function baton(env: Record<string, string>, ...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, { io, env: { BATON_NATS_DIR: join(dir, 'none'), ...env } });
    return { code, out: io.out(), err: io.err() };
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'baton-cli-creds-'));
    server = await startNatsServer({ args: ['--user', 'someone', '--pass', 'secret'] });
    url = server.url;
  });

  afterAll(() => stopServer(server, dir));

  it('NATS_CREDS unset against a server that requires credentials: unauthenticated, saying NATS_CREDS is not set and what to do', async () => {
    const typed = await baton({ NATS_URL: url }, 'streams', '--json');
    expect({ code: typed.code, out: typed.out }).toEqual({ code: 1, out: '' });
    const { error } = JSON.parse(typed.err) as { error: { code: string; message: string; details: Record<string, unknown> } };
    expect(error.code).toBe('unauthenticated');
    expect(error.message).toContain(`NATS at ${url} requires credentials, and NATS_CREDS is not set`);
    expect(error.message).toContain('baton creds admin');
    expect(error.details).toEqual({ nats_url: url, nats_creds: null });
  });

  it('a credentials file the server does not accept (another deployment’s): unauthenticated naming NATS_CREDS and its file', async () => {
    const issued = issueCreds(openDeployment(join(dir, 'other-deployment'), 'baton'), { kind: 'op', relay: 'admin' });
    const typed = await baton({ NATS_URL: url, NATS_CREDS: issued.file }, 'streams', '--json');
    expect(typed.code).toBe(1);
    const { error } = JSON.parse(typed.err) as { error: { code: string; message: string; details: Record<string, unknown> } };
    expect(error.code).toBe('unauthenticated');
    expect(error.message).toContain(`NATS at ${url} refused the credentials file in NATS_CREDS (${issued.file})`);
    expect(error.message).toContain('Authorization Violation');
    expect(error.details).toEqual({ nats_url: url, nats_creds: issued.file });
    const prose = await baton({ NATS_URL: url, NATS_CREDS: issued.file }, 'streams');
    expect(prose.code).toBe(1);
    expect(prose.err).not.toContain('cannot reach');
  });

  it('a file that is no credentials file at all: unauthenticated, saying so', async () => {
    const garbage = join(dir, 'garbage.creds');
    await writeFile(garbage, 'not a credentials file\n');
    const typed = await baton({ NATS_URL: url, NATS_CREDS: garbage }, 'streams', '--json');
    expect(typed.code).toBe(1);
    expect(JSON.parse(typed.err)).toMatchObject({
      error: { code: 'unauthenticated', message: expect.stringContaining(`the credentials file in NATS_CREDS (${garbage}) is not a NATS credentials file`) },
    });
  });

  it('a credentials file that cannot be read: unauthenticated naming the file (not "cannot reach NATS")', async () => {
    const absent = join(dir, 'absent.creds');
    const typed = await baton({ NATS_URL: url, NATS_CREDS: absent }, 'streams', '--json');
    expect(typed.code).toBe(1);
    expect(JSON.parse(typed.err)).toMatchObject({
      error: {
        code: 'unauthenticated',
        message: expect.stringContaining(`the credentials file in NATS_CREDS (${absent}) cannot be read`),
        details: { nats_creds: absent },
      },
    });
  });

  it('NATS not reached at all stays unavailable', async () => {
    const typed = await baton({ NATS_URL: `nats://127.0.0.1:${await freePort()}` }, 'streams', '--json');
    expect(typed.code).toBe(69);
    expect(JSON.parse(typed.err)).toMatchObject({ error: { code: 'unavailable', message: expect.stringContaining('cannot reach NATS') } });
  });
});

/**
 * With --json stderr holds JSON only, and a warning still reaches the caller: a command that ends
 * without failing writes its warnings as one line, `{"warnings":[{ code, message }]}`, after its
 * output (stdout stays the documented result); a failure carries them in `details.warnings`. The
 * case docs/sre.md names: admin credentials an earlier Baton issued with allow_responses, on a real
 * nats-server with Baton's authentication and its streams.
 */
describe('with --json a warning reaches the caller as JSON: admin credentials an earlier Baton issued (allow_responses)', () => {
  const prefix = 'baton';
  let server: PrivateNatsServer | undefined;
  let url: string;
  let dir: string;
  let current: string;
  let old: string;

  async function baton(env: Record<string, string>, ...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, { io, env: { BATON_NATS_DIR: join(dir, 'none'), NATS_URL: url, BATON_PREFIX: prefix, ...env } });
    return { code, out: io.out(), err: io.err() };
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'baton-cli-warn-'));
    const deployment = openDeployment(join(dir, 'nats-auth'), prefix);
    ensureServiceCreds(deployment);
    const port = await freePort();
    const config = writeServerConfig(deployment, { listen: `127.0.0.1:${port}`, storeDir: join(dir, 'jetstream') });
    server = await startNatsServer({ port, config });
    url = server.url;
    const admin = Principals.operator('admin');
    current = issueCreds(deployment, admin).file;
    const handle = await connectNats({ servers: url, credsFile: current, reconnect: false });
    try {
      await provision(handle.jsm, batonTopology(prefix, { storage: 'memory' }));
    } finally {
      await handle.close();
    }
    // What an earlier Baton issued the admin: the same rights and allow_responses.
    const user = createNkeyPair('user');
    old = join(dir, 'old-admin.creds');
    const granted = { ...permissionsFor(prefix, admin), allowResponses: true };
    await writeFile(old, credsFile(userJwt(deployment.account, user, 'admin', granted, Math.floor(Date.now() / 1000)), user));
  });

  afterAll(() => stopServer(server, dir));

  const allowResponses = () => ({ code: 'creds_allow_responses', message: expect.stringContaining(`the credentials in ${old} carry allow_responses`) });

  it('a success: stdout is the documented array, stderr the one {"warnings":[…]} line with the warning\'s code; current credentials: nothing on stderr', async () => {
    const warned = await baton({ NATS_CREDS: old }, 'streams', '--json');
    expect(warned.code).toBe(0);
    const streams = JSON.parse(warned.out) as { stream: string }[];
    expect(streams.map((s) => s.stream)).toEqual(['BATON_EVENTS', 'BATON_INBOX', 'BATON_DLQ']);
    expect(warned.err).toMatch(/^[^\n]+\n$/);
    expect(JSON.parse(warned.err)).toEqual({ warnings: [allowResponses()] });
    expect((JSON.parse(warned.err) as { warnings: { message: string }[] }).warnings[0]!.message).toContain('baton creds admin --rotate');

    const fresh = await baton({ NATS_CREDS: current }, 'streams', '--json');
    expect({ code: fresh.code, err: fresh.err }).toEqual({ code: 0, err: '' });
    expect(JSON.parse(fresh.out)).toEqual(streams.map(() => expect.objectContaining({ stream: expect.any(String) })));

    // Without --json the same warning is prose on stderr.
    const prose = await baton({ NATS_CREDS: old }, 'streams');
    expect(prose.code).toBe(0);
    expect(prose.err).toContain(`baton: warning: the credentials in ${old} carry allow_responses`);
  });

  it("a failure carries the same warning object in its one line's details.warnings, and no warnings line besides", async () => {
    const missing = await baton({ NATS_CREDS: old, BATON_PREFIX: 'elsewhere' }, 'streams', '--json');
    expect({ code: missing.code, out: missing.out }).toEqual({ code: 1, out: '' });
    expect(missing.err).toMatch(/^[^\n]+\n$/);
    expect(JSON.parse(missing.err)).toMatchObject({ error: { code: 'not_found', details: { warnings: [allowResponses()] } } });
  });

  it('a failure the command writes itself (baton message: no such run) carries it too, in one line', async () => {
    const sent = await baton({ NATS_CREDS: old }, 'message', 'r-none', '--project', 'acme', '--text', 'hello', '--wait-ms', '200', '--json');
    expect(sent.code).toBe(1);
    expect(JSON.parse(sent.out)).toMatchObject({ workflow_run_id: 'r-none', duplicate: false });
    expect(sent.err).toMatch(/^[^\n]+\n$/);
    expect(JSON.parse(sent.err)).toEqual({ error: { code: 'not_found', message: expect.any(String), issues: [], details: { warnings: [allowResponses()] } } });
  });
});
