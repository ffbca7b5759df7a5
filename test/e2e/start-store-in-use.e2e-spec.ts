// `npm start` (scripts/start.js) does not start its nats-server on a JetStream store another
// nats-server holds — one an SRE started by hand from the deployment's configuration to restore a
// backup (docs/sre.md, Back up and restore a deployment), or an orphan of an earlier start: two
// servers on one store corrupt it. The other server here is a stand-in whose command line names the
// checkout's store as a nats-server's would (it never opens the store), so the real store is not
// touched.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, npmStartMayRun, repoRoot } from '@baton/testing';

// npm start's nats-server keeps its data in the checkout's var/nats: not while a developer's npm start runs from it.
const itRunsStart = npmStartMayRun() ? it : it.skip;

describe('npm start when a nats-server already runs on its store', () => {
  itRunsStart(
    'refuses with store_in_use naming the other server, starts nothing, and writes no local.json',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'baton-start-store-in-use-'));
      const standIn = join(dir, 'nats-server');
      writeFileSync(standIn, '#!/bin/sh\nwhile :; do sleep 1; done\n');
      chmodSync(standIn, 0o755);
      const holder = spawn('/bin/sh', [standIn, '-js', '-sd', join(repoRoot(), 'var', 'nats')], { stdio: 'ignore' });
      try {
        const env: Record<string, string | undefined> = {
          ...process.env,
          BATON_NATS_DIR: join(dir, 'deployment'),
          NATS_PORT: String(await freePort()),
          BATON_SKIP_BUILD: '1',
          BATON_PREFIX: `siu${randomBytes(4).toString('hex')}`,
        };
        for (const key of ['NATS_URL', 'NATS_CREDS', 'BATON_NATS_AUTH']) delete env[key];
        const start = spawn(process.execPath, [join(repoRoot(), 'scripts', 'start.js')], { cwd: repoRoot(), env, stdio: ['ignore', 'pipe', 'pipe'] });
        let output = '';
        start.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
        start.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
        const [code] = (await once(start, 'exit')) as [number | null];
        expect(code).toBe(1);
        expect(output).toContain(
          `[start] error (store_in_use): a nats-server (pid ${holder.pid}: /bin/sh ${standIn} -js -sd ${join(repoRoot(), 'var', 'nats')})`,
        );
        expect(output).toContain(`Stop it first (kill ${holder.pid})`);
        expect(output).not.toContain('starting nats-server');
        expect(existsSync(join(dir, 'deployment', 'local.json'))).toBe(false);
      } finally {
        const exited = once(holder, 'exit');
        holder.kill('SIGKILL');
        await exited;
        rmSync(dir, { recursive: true, force: true });
      }
    },
    60_000,
  );
});
