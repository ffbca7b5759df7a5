// `npm start` (scripts/start.js) refuses to start a deployment whose folder's nats-server.conf keeps
// its JetStream data in another store that holds streams, while the store it would start on holds
// none (BATON_NATS_DIR pointed at another checkout's folder): the deployment would come up empty,
// its history out of sight. The stores here are private folders (BATON_NATS_STORE), so the checkout's
// var/nats — which other start specs fill — decides nothing. The other store's streams are folders
// laid out as nats-server lays them out; no server reads them.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, npmStartMayRun, repoRoot } from '@baton/testing';

const itRunsStart = npmStartMayRun() ? it : it.skip;

/** npm start with a deployment folder and a store of the test's own; its exit code and output. */
async function start(dir: string): Promise<{ code: number | null; output: string }> {
  const env: Record<string, string | undefined> = {
    ...process.env,
    BATON_NATS_DIR: join(dir, 'deployment'),
    BATON_NATS_STORE: join(dir, 'new-store'),
    NATS_PORT: String(await freePort()),
    BATON_SKIP_BUILD: '1',
    BATON_PREFIX: `slb${randomBytes(4).toString('hex')}`,
  };
  for (const key of ['NATS_URL', 'NATS_CREDS', 'BATON_NATS_AUTH', 'BATON_START_EMPTY_STORE']) delete env[key];
  const child = spawn(process.execPath, [join(repoRoot(), 'scripts', 'start.js')], { cwd: repoRoot(), env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, output };
}

describe('npm start when the deployment folder names another store that holds streams', () => {
  itRunsStart(
    'refuses with store_left_behind naming that store and its streams, and starts and writes nothing',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'baton-start-left-behind-'));
      try {
        const oldStore = join(dir, 'old-store');
        for (const stream of ['OLD_EVENTS', 'OLD_INBOX']) mkdirSync(join(oldStore, 'jetstream', 'ACCOUNT', 'streams', stream), { recursive: true });
        mkdirSync(join(dir, 'deployment'));
        writeFileSync(join(dir, 'deployment', 'nats-server.conf'), `listen: "127.0.0.1:4999"\njetstream {\n  store_dir: ${JSON.stringify(oldStore)}\n}\n`);

        const refused = await start(dir);
        expect(refused.code).toBe(1);
        expect(refused.output).toContain(
          `[start] error (store_left_behind): the deployment's nats-server.conf (${join(dir, 'deployment', 'nats-server.conf')}) keeps its JetStream data in ${oldStore} (2 streams: ACCOUNT/OLD_EVENTS, ACCOUNT/OLD_INBOX)`,
        );
        // The store it would use, outside the checkout, named whole.
        expect(refused.output).toContain(`but npm start of this checkout would start its nats-server on ${join(dir, 'new-store')}, which holds none`);
        expect(refused.output).toContain('BATON_START_EMPTY_STORE=1 starts on the empty store anyway');
        expect(refused.output).not.toContain('starting nats-server');
        // Nothing written: no local.json, the configuration as it was, no new store.
        expect(readdirSync(join(dir, 'deployment'))).toEqual(['nats-server.conf']);
        expect(existsSync(join(dir, 'new-store'))).toBe(false);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    60_000,
  );
});
