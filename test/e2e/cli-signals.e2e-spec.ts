import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * `baton` as a user runs it (bin/baton.js and the built CLI): a Ctrl-C that comes while the CLI is
 * still loading (a second or more on a busy machine) stops it and says so, typed, exit 130 — the
 * process used to die of the signal without a word. The loading is held for a moment by a preload,
 * which says when it began, so the signal lands inside it every time.
 */
describe('baton stopped while it loads', () => {
  const dir = mkdtempSync(join(tmpdir(), 'baton-signal-'));
  const preload = join(dir, 'slow-load.js');
  writeFileSync(
    preload,
    `const Module = require('node:module');
const entry = require('node:path').join('apps', 'cli', 'src', 'main.js');
const load = Module._load;
Module._load = function (request, ...rest) {
  if (request.endsWith(entry)) {
    process.stderr.write('LOADING\\n');
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 500);
  }
  return load.call(this, request, ...rest);
};
`,
  );

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const interrupted = (argv: string[]) =>
    new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, ['--require', preload, join(__dirname, '..', '..', 'bin', 'baton.js'), ...argv], {
        env: { ...process.env, BATON_CLI_NO_BUILD: '1', BATON_NATS_AUTH: 'none' },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr!.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        if (stderr.includes('LOADING\n') && !child.killed) child.kill('SIGINT');
      });
      child.on('exit', (code, signal) => resolve({ code, signal, stderr }));
    });

  it('Ctrl-C during the loading: "SIGINT before the command began; nothing was done", exit 130 (typed with --json)', async () => {
    const plain = await interrupted(['verify']);
    expect({ code: plain.code, signal: plain.signal }).toEqual({ code: 130, signal: null });
    expect(plain.stderr).toContain('baton: SIGINT before the command began; nothing was done');
    const json = await interrupted(['replay', '--json']);
    expect(json.code).toBe(130);
    const line = json.stderr.split('\n').find((l) => l.startsWith('{'))!;
    expect(JSON.parse(line)).toEqual({ error: { code: 'interrupted', message: 'SIGINT before the command began; nothing was done', issues: [] } });
  });
});
