// Test support (not a spec): start a private nats-server with Baton's per-service users and subject
// permissions (infra/nats/permissions/baton-users.conf, copied verbatim) on a free loopback port.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

export const NATS_USERS = ['router', 'ledger', 'watchdog', 'notifier', 'agent', 'admin'] as const;
export type NatsUser = (typeof NATS_USERS)[number];

/** The checked-in users file. */
export const USERS_FILE = join(__dirname, '..', '..', '..', '..', 'infra', 'nats', 'permissions', 'baton-users.conf');

export interface PermissionedNats {
  port: number;
  /** `nats://127.0.0.1:<port>` */
  url: string;
  /** The user's credentials (the nats client takes them as `user` / `pass`, not inside the URL). */
  credentials(user: NatsUser): { user: string; pass: string };
  /** The server's log so far (permission violations are logged as `Permissions Violation`). */
  log(): string;
  stop(): Promise<void>;
}

function natsServerBinary(): string {
  for (const dir of [...(process.env['PATH'] ?? '').split(delimiter), '/usr/sbin', '/usr/local/sbin', '/usr/local/bin']) {
    const file = join(dir, 'nats-server');
    if (dir && existsSync(file)) return file;
  }
  throw new Error('nats-server is not installed (needed to test the permissions configuration)');
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  server.close();
  await once(server, 'close');
  return port;
}

async function accepting(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Start nats-server (JetStream on, store in a temp dir) with the users file; passwords are random, passed by environment. */
export async function startPermissionedNats(): Promise<PermissionedNats> {
  const dir = await mkdtemp(join(tmpdir(), 'baton-nats-perm-'));
  const port = await freePort();
  await copyFile(USERS_FILE, join(dir, 'baton-users.conf'));
  await writeFile(join(dir, 'server.conf'), `listen: 127.0.0.1:${port}\njetstream { store_dir: "${join(dir, 'js')}" }\ninclude ./baton-users.conf\n`);
  const passwords = Object.fromEntries(NATS_USERS.map((user) => [user, `pw${randomBytes(12).toString('hex')}`])) as Record<NatsUser, string>;
  const env: Record<string, string> = { PATH: process.env['PATH'] ?? '' };
  for (const user of NATS_USERS) env[`BATON_NATS_${user.toUpperCase()}_PASSWORD`] = passwords[user];
  const child: ChildProcess = spawn(natsServerBinary(), ['-c', join(dir, 'server.conf')], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const deadline = Date.now() + 10_000;
  while (!(await accepting(port))) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`nats-server did not start:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    port,
    url: `nats://127.0.0.1:${port}`,
    credentials: (user) => ({ user, pass: passwords[user] }),
    log: () => output,
    async stop() {
      if (child.exitCode === null) {
        const exited = once(child, 'exit');
        child.kill('SIGTERM');
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
