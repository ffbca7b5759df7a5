import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { batonStreamNames, batonTopology, connectNats, provision, type NatsHandle } from '@baton/eventstore';

/**
 * `baton` as its own process, where what ends the process matters: a reader that closes the pipe
 * early (`baton streams | head -1`) and a NATS_URL port that accepts TCP and never speaks NATS.
 *
 * The child runs the CLI from its TypeScript sources (transpiled by @swc/core as Jest does, with
 * @baton/* mapped to the libraries' sources) and calls `main` exactly as bin/baton.js does, so no
 * build is needed and what runs is this checkout.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const ROOT = join(__dirname, '..', '..', '..');

/** The child's program: load the sources, then bin/baton.js's call of `main`. */
const CHILD = `
const fs = require('node:fs');
const path = require('node:path');
const Module = require('node:module');
const { transformSync } = require('@swc/core');
const root = ${JSON.stringify(ROOT)};
const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  const lib = /^@baton\\/([a-z-]+)$/.exec(request);
  return resolveFilename.call(this, lib ? path.join(root, 'libs', lib[1], 'src', 'index.ts') : request, ...rest);
};
const { swcOptions } = require(path.join(root, 'jest.preset.js'));
require.extensions['.ts'] = (module, filename) => {
  const { code } = transformSync(fs.readFileSync(filename, 'utf8'), { filename, ...swcOptions });
  module._compile(code, filename);
};
require(path.join(root, 'apps', 'cli', 'src', 'main.ts'))
  .main(process.argv.slice(1))
  .then(
    (code) => {
      process.exitCode = code;
    },
    (error) => {
      process.stderr.write('baton: ' + (error && error.stack ? error.stack : String(error)) + '\\n');
      process.exitCode = 1;
    },
  );
`;

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  stdout: string;
  /** From spawn to exit. */
  ms: number;
}

/**
 * Run `baton <argv>` in a child process; `closeStdout` destroys the read end of its stdout pipe at
 * once, as `| head -1` does once it has its line (the child writes only later, after loading).
 * Killed after `killAfterMs` (then `signal` is SIGKILL).
 */
async function runChild(argv: string[], env: Record<string, string>, opts: { closeStdout?: boolean; killAfterMs?: number } = {}): Promise<Exit> {
  const started = Date.now();
  const child = spawn(process.execPath, ['-e', CHILD, ...argv], {
    cwd: ROOT,
    env: { ...process.env, BATON_NATS_AUTH: 'none', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  if (opts.closeStdout) child.stdout.destroy();
  else child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const killer = setTimeout(() => child.kill('SIGKILL'), opts.killAfterMs ?? 60_000);
  const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
  clearTimeout(killer);
  return { code, signal, stdout, stderr, ms: Date.now() - started };
}

describe('baton as a process (real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;

  beforeAll(async () => {
    prefix = `t${randomBytes(5).toString('hex')}`;
    nats = await connectNats({ servers: NATS_URL, name: 'cli-process-int', reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
  });

  afterAll(async () => {
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
    await nats.drain();
  });

  it('a reader that closed the pipe (| head -1) ends streams and dlq list quietly: no EPIPE stack trace, the command exit code', async () => {
    const env = { NATS_URL, REDIS_URL, BATON_PREFIX: prefix };
    // The control: the same commands with their reader in place print something to cut.
    const whole = await runChild(['streams'], env);
    expect(whole).toMatchObject({ code: 0, signal: null });
    expect(whole.stdout.length).toBeGreaterThan(0);

    for (const argv of [['streams'], ['streams', '--json'], ['dlq', 'list', '--json']]) {
      const cut = await runChild(argv, env, { closeStdout: true });
      expect({ argv, code: cut.code, signal: cut.signal, stderr: cut.stderr }).toEqual({ argv, code: 0, signal: null, stderr: '' });
    }
  }, 120_000);

  it('a NATS server that stops answering once the command is done (while the CLI drains its connection) does not hold the process', async () => {
    // A TCP proxy to the real server that goes silent, both ways, at the connection's first UNSUB:
    // the drain after the command's result, which then waits for a PONG that never comes.
    const target = new URL(NATS_URL);
    let frozen = false;
    const open = new Set<Socket>();
    const proxy = createServer((client) => {
      const upstream = connect(Number(target.port || 4222), target.hostname);
      for (const socket of [client, upstream]) {
        open.add(socket);
        socket.on('error', () => undefined);
      }
      client.on('data', (chunk: Buffer) => {
        if (chunk.toString('latin1').includes('UNSUB')) frozen = true;
        if (!frozen) upstream.write(chunk);
      });
      upstream.on('data', (chunk: Buffer) => {
        if (!frozen) client.write(chunk);
      });
    });
    proxy.listen(0, '127.0.0.1');
    await once(proxy, 'listening');
    try {
      const exit = await runChild(
        ['streams', '--json'],
        { NATS_URL: `nats://127.0.0.1:${(proxy.address() as AddressInfo).port}`, REDIS_URL, BATON_PREFIX: prefix },
        { killAfterMs: 30_000 },
      );
      expect(frozen).toBe(true);
      expect(exit).toMatchObject({ code: 0, signal: null, stderr: '' });
      expect(JSON.parse(exit.stdout)).toEqual(expect.anything());
      expect(exit.ms).toBeLessThan(15_000);
    } finally {
      for (const socket of open) socket.destroy();
      proxy.close();
    }
  }, 60_000);

  describe('a NATS_URL port that accepts TCP and never speaks NATS', () => {
    let server: Server;
    let url: string;
    const sockets = new Set<Socket>();
    /** When the CLI's first dial was accepted: its connect timeout runs from there. */
    let firstAcceptedAt: number | null = null;

    beforeAll(async () => {
      server = createServer((socket) => {
        // Accept, never write, never hang up (until the test ends).
        firstAcceptedAt ??= Date.now();
        sockets.add(socket);
        socket.on('error', () => undefined);
      });
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      url = `nats://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });

    afterAll(async () => {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    });

    it('the command fails unavailable within the CLI timeout, and the process exits though the socket is still open', async () => {
      const exit = await runChild(['streams', '--json'], { NATS_URL: url, REDIS_URL, BATON_PREFIX: prefix }, { killAfterMs: 30_000 });
      expect(exit.signal).toBeNull();
      expect(exit.code).toBe(69);
      expect(exit.stdout).toBe('');
      expect(JSON.parse(exit.stderr.trim().split('\n').pop()!)).toMatchObject({ error: { code: 'unavailable' } });
      expect(exit.stderr).toContain(`cannot reach NATS at ${url}`);
      const exitedAt = Date.now();
      // It did connect, and this peer never hung up on it: the process ended by itself.
      expect(sockets.size).toBeGreaterThan(0);
      // From its dial to its exit: the CLI's 5 s connect timeout and the grace period, with room to
      // spare; well under the library's 20 s default. Measured from the dial, not the spawn: the
      // child's start-up (transpiling the sources) took 19 s on a loaded CI machine.
      expect(exitedAt - firstAcceptedAt!).toBeLessThan(12_000);
    }, 60_000);
  });
});
