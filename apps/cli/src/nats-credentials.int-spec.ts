import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { issueCreds, openDeployment } from '@baton/eventstore';
import { main } from './main';
import { bufferedIo } from './output';

/** A loopback port nothing listens on (yet). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Resolves once something accepts TCP on `port`. */
async function listening(port: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port });
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`nats-server did not listen on ${port}`);
}

/**
 * NATS that is reached and refuses the credentials is not "unavailable": retrying does not help,
 * other credentials do. The CLI says `unauthenticated`, names what it presented (NATS_CREDS's file,
 * or that NATS_CREDS is unset) and what to do. A real nats-server that requires a user and a
 * password refuses every credentials file and a connection with none.
 */
describe('baton against a NATS server that refuses its credentials (a real nats-server requiring auth)', () => {
  let server: ChildProcess;
  let url: string;
  let dir: string;

  async function baton(env: Record<string, string>, ...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, { io, env: { BATON_NATS_DIR: join(dir, 'none'), ...env } });
    return { code, out: io.out(), err: io.err() };
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'baton-cli-creds-'));
    const port = await freePort();
    server = spawn('nats-server', ['-a', '127.0.0.1', '-p', String(port), '--user', 'someone', '--pass', 'secret'], { stdio: 'ignore' });
    await listening(port);
    url = `nats://127.0.0.1:${port}`;
  });

  afterAll(async () => {
    if (server.exitCode === null) {
      const exited = once(server, 'exit');
      server.kill('SIGKILL');
      await exited;
    }
    await rm(dir, { recursive: true, force: true });
  });

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
    expect(typed.code).toBe(1);
    expect(JSON.parse(typed.err)).toMatchObject({ error: { code: 'unavailable', message: expect.stringContaining('cannot reach NATS') } });
  });
});
