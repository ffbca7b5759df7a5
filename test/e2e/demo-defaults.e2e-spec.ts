import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from '@baton/testing';

/*
 * `npm run demo` with npm start stopped: the deployment folder holds a deployment but no local.json,
 * so the demo falls back to the default NATS URL (and operator API), which on a shared machine are
 * another deployment's. It says so, as the CLI does (`default_server_read`), before it connects —
 * before, it went on silently. The built demo in its own process, as `npm run demo` runs it; the
 * operator API it is pointed at answers nothing, so it stops right after the warning.
 */

function demo(env: Record<string, string>) {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !['NATS_URL', 'NATS_CREDS', 'BATON_API_URL', 'BATON_NATS_DIR'].includes(name)),
  );
  return spawnSync(process.execPath, [join(repoRoot(), 'dist', 'apps', 'demo', 'src', 'main.js')], {
    cwd: repoRoot(),
    env: { ...base, ...env },
    encoding: 'utf8',
    timeout: 30_000,
  });
}

describe('npm run demo with npm start stopped (a deployment folder without local.json)', () => {
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'baton-demo-defaults-'));
    writeFileSync(join(dir, 'nats-server.conf'), 'listen: 127.0.0.1:4222\n');
  });

  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('warns default_server_read naming the folder and the defaults it falls back to, then stops as the API does not answer', () => {
    const run = demo({ BATON_NATS_DIR: dir, BATON_API_URL: 'http://127.0.0.1:1' });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain(
      `warning (default_server_read): ${dir} holds a deployment (nats-server.conf) but no local.json: npm start is not running, so the demo uses NATS at the default nats://127.0.0.1:4222, which may be another deployment's`,
    );
    // BATON_API_URL was set: the API is not a default, and the warning does not say it is.
    expect(run.stderr).not.toContain('operator API at the default');
    expect(run.stderr).toContain('The operator API at http://127.0.0.1:1 does not answer');
  });

  it('a local.json npm start did not write is named as such', () => {
    writeFileSync(join(dir, 'local.json'), '{"not":"npm start"}\n');
    const run = demo({ BATON_NATS_DIR: dir, BATON_API_URL: 'http://127.0.0.1:1' });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain(`warning (default_server_read): ${dir} holds a deployment (nats-server.conf) but its local.json is not one npm start wrote`);
  });

  it('a folder that holds no deployment, or NATS_URL set: no warning', () => {
    const empty = mkdtempSync(join(tmpdir(), 'baton-demo-empty-'));
    try {
      expect(demo({ BATON_NATS_DIR: empty, BATON_API_URL: 'http://127.0.0.1:1' }).stderr).not.toContain('default_server_read');
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
    expect(demo({ BATON_NATS_DIR: dir, NATS_URL: 'nats://127.0.0.1:4222', BATON_API_URL: 'http://127.0.0.1:1' }).stderr).not.toContain('default_server_read');
  });
});
