// `npm start` (scripts/start.js) runs `baton nats-config --json` to make or refresh the deployment's
// NATS credentials and server configuration. What nats-config warns of (a nats-server.conf whose
// settings it could not read, a store_dir it moved) reaches npm start's terminal as a
// `[start] warning (<code>): …` line, read from the CLI's stderr line `{"warnings":[…]}`, instead
// of being dropped with the rest of its stderr.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, repoRoot } from '@baton/testing';

const natsUrl = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';

// scripts/ holds plain Node scripts (no project of their own): load the module npm start uses.
const { natsConfigWarningLines } = createRequire(__filename)(join(__dirname, '..', '..', 'scripts', 'nats-config-warnings.js')) as {
  natsConfigWarningLines: (
    stderr: string,
    summary: { changed: { setting: string; from?: string; to?: string }[] },
    options: { ownServer: boolean },
  ) => string[];
};

/** `baton nats-config --dir <dir> <args> --json` with the built CLI npm start runs. */
function natsConfig(dir: string, ...args: string[]): { status: number | null; stdout: string; stderr: string } {
  return spawnSync(process.execPath, [join(repoRoot(), 'dist', 'apps', 'cli', 'src', 'main.js'), 'nats-config', '--dir', dir, ...args, '--json'], {
    encoding: 'utf8',
  });
}

/**
 * npm start against NATS_URL with its credentials in `dir`, up to its first step that fails: a
 * Redis that no one can reach and that it may not start itself (not a loopback address), so it
 * exits 1 before starting any service, having run nats-config.
 */
async function startUntilRedis(dir: string): Promise<{ code: number | null; output: string }> {
  const env: Record<string, string | undefined> = {
    ...process.env,
    NATS_URL: natsUrl,
    BATON_NATS_DIR: dir,
    REDIS_URL: 'redis://redis.invalid:6379',
    BATON_SKIP_BUILD: '1',
  };
  delete env['BATON_NATS_AUTH'];
  const start = spawn(process.execPath, [join(repoRoot(), 'scripts', 'start.js')], { cwd: repoRoot(), env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  start.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  start.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => start.on('close', resolve));
  return { code, output };
}

describe('npm start shows what baton nats-config warns of', () => {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'baton-start-nats-config-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('a nats-server.conf naming no listen nats-config can read: a [start] warning with its code; once rewritten, none', async () => {
    // The deployment folder, made by the built CLI npm start runs; then its listen line taken out.
    const made = natsConfig(dir);
    expect({ status: made.status, stderr: made.stderr }).toEqual({ status: 0, stderr: '' });
    const conf = join(dir, 'nats-server.conf');
    const text = readFileSync(conf, 'utf8');
    expect(text).toMatch(/^listen: .*\n/m);
    writeFileSync(conf, text.replace(/^listen: .*\n/m, ''));

    const warned = await startUntilRedis(dir);
    expect(warned.code).toBe(1);
    expect(warned.output).toContain('Redis is not reachable at redis://redis.invalid:6379');
    expect(warned.output).toContain(`[start] warning (server_config_unread): ${conf} named no listen nats-config could read`);

    // nats-config wrote the default listen: nothing to warn of the next time.
    const quiet = await startUntilRedis(dir);
    expect(quiet.code).toBe(1);
    expect(quiet.output).toContain(`[start] using NATS at ${natsUrl} with the credentials in ${dir}`);
    expect(quiet.output).not.toContain('[start] warning');
  }, 60_000);

  it('npm start running its own server: the listen it moved to a free port is no restart to warn of; a store_dir moved still is', async () => {
    const own = join(dir, 'own');
    expect(natsConfig(own, '--listen', `127.0.0.1:${await freePort()}`, '--store-dir', join(own, 'js-a')).status).toBe(0);
    // What npm start runs when 4222 is taken: another free port, the same store.
    const moved = natsConfig(own, '--listen', `127.0.0.1:${await freePort()}`, '--store-dir', join(own, 'js-a'));
    expect(moved.status).toBe(0);
    const summary = JSON.parse(moved.stdout) as { changed: { setting: string }[] };
    expect(summary.changed.map((c) => c.setting)).toEqual(['listen']);
    expect(JSON.parse(moved.stderr)).toEqual({ warnings: [expect.objectContaining({ code: 'restart_required' })] });
    expect(natsConfigWarningLines(moved.stderr, summary, { ownServer: true })).toEqual([]);
    // Against a server npm start did not start (NATS_URL), the same warning is shown.
    expect(natsConfigWarningLines(moved.stderr, summary, { ownServer: false })).toEqual([
      expect.stringMatching(/^\[start\] warning \(restart_required\): .*must be restarted/),
    ]);

    // A store_dir moved: npm start says, for its own server, that it starts on the new folder and the
    // former one's data is not used (not "restart a running server": none runs; upgrade audit 2 F5).
    const stored = natsConfig(own, '--listen', `127.0.0.1:${await freePort()}`, '--store-dir', join(own, 'js-b'));
    const storedSummary = JSON.parse(stored.stdout) as { changed: { setting: string; from?: string; to?: string }[] };
    expect(natsConfigWarningLines(stored.stderr, storedSummary, { ownServer: true })).toEqual([
      `[start] warning (store_dir_changed): the deployment's nats-server.conf kept its JetStream data in ${join(own, 'js-a')}; npm start of this checkout starts its nats-server on ${join(own, 'js-b')}, so what ${join(own, 'js-a')} holds is not used (to upgrade a deployment in another checkout, stop it and copy the whole var/ — the deployment folder and the store — or upgrade it in its own checkout)`,
    ]);
    expect(natsConfigWarningLines(stored.stderr, storedSummary, { ownServer: false })).toEqual([
      expect.stringMatching(/^\[start\] warning \(restart_required\): .*its JetStream data stays in the former store_dir/),
    ]);
  });
});
