// Where `npm start` (scripts/start.js) has its own nats-server listen: NATS_PORT when it is set (a
// port in use is a startup error, never another port), else the listen `baton nats-config --listen`
// set in the deployment folder's nats-server.conf (kept as it is; in use, an error too), else 4222
// or, when that is taken, a free port. A listen npm start chose itself is noted in the folder
// (npm-start.json), so a later start does not keep it as someone's choice.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer, connect, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, npmStartMayRun, repoRoot } from '@baton/testing';

interface ChosenListen {
  listen: string;
  host: string;
  connect: string;
  port: number;
  from: 'NATS_PORT' | 'nats-server.conf' | 'default' | 'free';
  own: boolean;
  replaces?: string;
}
interface ChooseInput {
  natsPort?: number;
  confListen?: string;
  recordedListen?: string;
  confFile?: string;
  inUse: (host: string, port: number) => Promise<boolean>;
  freePort: () => Promise<number>;
}

// scripts/ holds plain Node scripts (no project of their own): load the module npm start uses.
const { chooseNatsListen, natsUrlOf } = createRequire(__filename)(join(__dirname, '..', '..', 'scripts', 'nats-listen.js')) as {
  chooseNatsListen: (input: ChooseInput) => Promise<ChosenListen>;
  natsUrlOf: (listen: { connect: string; port: number }) => string;
};

describe('chooseNatsListen: where npm start`s own nats-server listens', () => {
  /** Ports in use: `busy` (as host:port), every other one free; the free port handed out is 45000. */
  const choose = (input: Omit<ChooseInput, 'inUse' | 'freePort'>, busy: string[] = []) =>
    chooseNatsListen({ ...input, inUse: async (host, port) => busy.includes(`${host}:${port}`), freePort: async () => 45000 });

  it('NATS_PORT: that port on 127.0.0.1, whatever else is free or set', async () => {
    expect(await choose({ natsPort: 4333 })).toMatchObject({ listen: '127.0.0.1:4333', from: 'NATS_PORT', own: true });
    expect(await choose({ natsPort: 4333, confListen: '127.0.0.1:41234', recordedListen: '127.0.0.1:41234' })).not.toHaveProperty('replaces');
  });

  it('NATS_PORT in use: an error with its code, never another port', async () => {
    await expect(choose({ natsPort: 4333 }, ['127.0.0.1:4333'])).rejects.toMatchObject({
      code: 'nats_port_in_use',
      message: expect.stringContaining('NATS_PORT 4333: something already listens on 127.0.0.1:4333'),
    });
  });

  it('NATS_PORT over a listen someone set with baton nats-config: it wins, and says which listen it replaces', async () => {
    expect(await choose({ natsPort: 4333, confListen: '0.0.0.0:4444' })).toMatchObject({
      listen: '127.0.0.1:4333',
      from: 'NATS_PORT',
      replaces: '0.0.0.0:4444',
    });
  });

  it('a listen someone set (not npm start`s note, not the default): kept as it is, reached on loopback when it is a wildcard', async () => {
    const kept = await choose({ confListen: '0.0.0.0:4444', recordedListen: '127.0.0.1:41234' });
    expect(kept).toMatchObject({ listen: '0.0.0.0:4444', from: 'nats-server.conf', own: false, connect: '127.0.0.1', port: 4444 });
    expect(natsUrlOf(kept)).toBe('nats://127.0.0.1:4444');
    const v6 = await choose({ confListen: '[::1]:4444' });
    expect(v6).toMatchObject({ listen: '[::1]:4444', connect: '::1' });
    expect(natsUrlOf(v6)).toBe('nats://[::1]:4444');
  });

  it('a listen someone set that is in use: an error naming the file and the ways out, never another port', async () => {
    await expect(choose({ confListen: '127.0.0.1:4444', confFile: '/d/nats-server.conf' }, ['127.0.0.1:4444'])).rejects.toMatchObject({
      code: 'nats_listen_in_use',
      message: expect.stringMatching(/^\/d\/nats-server\.conf listens on 127\.0\.0\.1:4444 \(baton nats-config --listen\).*NATS_PORT/),
    });
  });

  it('npm start`s own earlier choice, the default or a listen that is no host:port: 4222 when free, else a free port', async () => {
    for (const confListen of [undefined, '127.0.0.1:4222', 'nonsense', '127.0.0.1:41234']) {
      const input = { confListen, recordedListen: '127.0.0.1:41234' };
      expect(await choose(input)).toMatchObject({ listen: '127.0.0.1:4222', from: 'default', own: true });
      expect(await choose(input, ['127.0.0.1:4222'])).toMatchObject({ listen: '127.0.0.1:45000', from: 'free', own: true });
    }
  });
});

// npm start's nats-server keeps its data in the checkout's var/nats: not while a developer's npm start runs from it.
const itRunsServer = npmStartMayRun() ? it : it.skip;

/** Whether something accepts connections on 127.0.0.1:`port`. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * npm start with its own nats-server (no NATS_URL), its deployment in `dir`, and a Redis no one can
 * reach and that it may not start itself (not a loopback address): it exits 1 at that step, having
 * chosen the listen and started its nats-server (which it stops) — or before, when it refuses.
 */
async function startOwnServer(dir: string, env: Record<string, string> = {}): Promise<{ code: number | null; output: string }> {
  const childEnv: Record<string, string | undefined> = {
    ...process.env,
    BATON_NATS_DIR: dir,
    REDIS_URL: 'redis://redis.invalid:6379',
    BATON_SKIP_BUILD: '1',
    ...env,
  };
  for (const key of ['NATS_URL', 'NATS_CREDS', 'BATON_NATS_AUTH']) if (!(key in env)) delete childEnv[key];
  const start = spawn(process.execPath, [join(repoRoot(), 'scripts', 'start.js')], { cwd: repoRoot(), env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  start.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  start.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => start.on('close', resolve));
  return { code, output };
}

/** The listen the folder's nats-server.conf names. */
function confListen(dir: string): string | undefined {
  return /^listen: "(.*)"$/m.exec(readFileSync(join(dir, 'nats-server.conf'), 'utf8'))?.[1];
}

describe('npm start takes NATS_PORT, and keeps the listen baton nats-config set', () => {
  let dir: string;
  let held: Server | undefined;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'baton-start-nats-port-'));
  });
  afterEach(async () => {
    await new Promise((resolve) => (held ? held.close(resolve) : resolve(undefined)));
    held = undefined;
    // The JetStream folder of this deployment's account in var/nats (npm start's store), if it made one.
    try {
      const { account } = JSON.parse(readFileSync(join(dir, 'deployment.json'), 'utf8')) as { account: string };
      rmSync(join(repoRoot(), 'var', 'nats', 'jetstream', account), { recursive: true, force: true });
    } catch {
      // no deployment was made
    }
    rmSync(dir, { recursive: true, force: true });
  });

  /** Hold 127.0.0.1:`port` with a listener of this test, as another server would. */
  async function hold(port: number): Promise<void> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    held = server;
  }

  it('a NATS_PORT that is no port, or beside NATS_URL: exit 1 before anything starts', async () => {
    const bad = await startOwnServer(dir, { NATS_PORT: '70000' });
    expect(bad).toEqual({ code: 1, output: '[start] NATS_PORT must be a port from 1 to 65535, got "70000"\n' });
    const both = await startOwnServer(dir, { NATS_PORT: '4333', NATS_URL: 'nats://127.0.0.1:4222' });
    expect(both.code).toBe(1);
    expect(both.output).toContain("[start] NATS_PORT is the port of npm start's own nats-server, which it does not run with NATS_URL set");
    expect(existsSync(join(dir, 'nats-server.conf'))).toBe(false);
  }, 30_000);

  it('a NATS_PORT in use: exit 1 with nats_port_in_use, no other port taken, nothing written', async () => {
    const port = await freePort();
    await hold(port);
    const { code, output } = await startOwnServer(dir, { NATS_PORT: String(port) });
    expect(code).toBe(1);
    expect(output).toContain(`[start] error (nats_port_in_use): NATS_PORT ${port}: something already listens on 127.0.0.1:${port}`);
    expect(output).not.toContain('starting nats-server');
    expect(existsSync(join(dir, 'nats-server.conf'))).toBe(false);
  }, 30_000);

  itRunsServer(
    'NATS_PORT free: its nats-server listens there (the conf and the note say so); a later start without it keeps no listen npm start chose',
    async () => {
      const port = await freePort();
      const { code, output } = await startOwnServer(dir, { NATS_PORT: String(port) });
      expect(output).toContain(`[start] starting nats-server with JetStream and authentication on 127.0.0.1:${port} (NATS_PORT)`);
      // It went on to Redis, which it cannot reach: exit 1, its nats-server stopped with it.
      expect(output).toContain('Redis is not reachable at redis://redis.invalid:6379');
      expect(code).toBe(1);
      expect(await listening(port)).toBe(false);
      expect(confListen(dir)).toBe(`127.0.0.1:${port}`);
      expect(JSON.parse(readFileSync(join(dir, 'npm-start.json'), 'utf8'))).toMatchObject({ listen: `127.0.0.1:${port}` });

      // Without NATS_PORT, the port it chose before is its own, not kept: 4222, or a free port when 4222 is taken.
      const again = await startOwnServer(dir);
      expect(again.output).toMatch(
        /starting nats-server with JetStream and authentication on 127\.0\.0\.1:\d+(?: \(4222 is in use: a free port; NATS_PORT chooses one\))? \(config/,
      );
      expect(again.output).not.toContain(`127.0.0.1:${port}`);
    },
    60_000,
  );

  itRunsServer(
    'a listen set with baton nats-config --listen: kept (not 4222, not a free port); in use, exit 1 with nats_listen_in_use',
    async () => {
      const port = await freePort();
      const made = spawnSync(
        process.execPath,
        [join(repoRoot(), 'dist', 'apps', 'cli', 'src', 'main.js'), 'nats-config', '--dir', dir, '--listen', `127.0.0.1:${port}`, '--json'],
        { encoding: 'utf8' },
      );
      expect(made.status).toBe(0);

      const kept = await startOwnServer(dir);
      expect(kept.output).toContain(
        `[start] starting nats-server with JetStream and authentication on 127.0.0.1:${port} (the listen baton nats-config --listen set)`,
      );
      expect(kept.code).toBe(1);
      expect(confListen(dir)).toBe(`127.0.0.1:${port}`);
      // Not npm start's choice: no note of it.
      expect(existsSync(join(dir, 'npm-start.json'))).toBe(false);

      await hold(port);
      const busy = await startOwnServer(dir);
      expect(busy.code).toBe(1);
      expect(busy.output).toContain(
        `[start] error (nats_listen_in_use): ${join(dir, 'nats-server.conf')} listens on 127.0.0.1:${port} (baton nats-config --listen), and something already listens there`,
      );
      expect(busy.output).not.toContain('starting nats-server');
    },
    60_000,
  );
});
