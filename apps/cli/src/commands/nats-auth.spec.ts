import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwtClaims, jwtOfCreds } from '@baton/eventstore';
import { main } from '../main';
import { bufferedIo } from '../output';

/** `baton <argv> --dir <dir>` in process, as the deployment folder's commands run. */
async function batonIn(dir: string, argv: string[]) {
  const io = bufferedIo();
  const code = await main([...argv, '--dir', dir], { io, env: { BATON_PREFIX: 'baton' } });
  return { code, out: io.out(), err: io.err() };
}

/**
 * The codes of the warnings a `--json` run wrote: its stderr is empty, or the one JSON line
 * `{"warnings":[{ code, message }]}` and nothing else.
 */
function warningCodes(err: string): string[] {
  if (err === '') return [];
  expect(err).toMatch(/^[^\n]+\n$/);
  return (JSON.parse(err) as { warnings: { code: string }[] }).warnings.map((warning) => warning.code);
}

/**
 * `baton creds` issues credentials signed by an existing deployment's account key. A folder it was
 * pointed at that holds no deployment (a mistyped --dir or BATON_NATS_DIR) is refused before
 * anything is written: a new operator and account made there would sign credentials no server
 * trusts. The default ./var/nats-auth gets one made, with a warning: it is the folder npm start and
 * nats-config configure the server from.
 */
describe('baton creds needs the deployment baton nats-config made', () => {
  let root: string;

  async function baton(argv: string[], env: Record<string, string | undefined> = {}) {
    const io = bufferedIo();
    const code = await main(argv, { io, env: { BATON_PREFIX: 'baton', ...env } });
    return { code, out: io.out(), err: io.err() };
  }

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'baton-creds-'));
  });

  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('a --dir with no deployment is a usage error (typed with --json) naming the folder and nats-config, and nothing is written', async () => {
    const typo = join(root, 'typo');
    const refused = await baton(['creds', 'agent', '--project', 'p1', '--agent', 'a1', '--dir', typo, '--json']);
    expect(refused.code).toBe(2);
    expect(refused.out).toBe('');
    const error = JSON.parse(refused.err) as { error: { code: string; message: string; details: { dir: string } } };
    expect(error.error).toMatchObject({ code: 'usage', details: { dir: typo } });
    expect(error.error.message).toContain('baton nats-config');
    expect(error.error.message).toContain('--dir or BATON_NATS_DIR');
    expect(existsSync(typo)).toBe(false);

    // An existing folder without deployment.json: the same, and it stays empty.
    const prose = await baton(['creds', 'service', 'router', '--dir', root]);
    expect(prose.code).toBe(2);
    expect(prose.err).toContain(`no deployment in ${root} (--dir)`);
    expect(await readdir(root)).toEqual([]);
    expect((await baton(['creds', 'admin', '--dir', root])).code).toBe(2);
    expect(await readdir(root)).toEqual([]);
  });

  it('BATON_NATS_DIR is checked the same way; the default ./var/nats-auth of the working directory gets a deployment made, with a warning naming the folder', async () => {
    const fromEnv = await baton(['creds', 'admin'], { BATON_NATS_DIR: join(root, 'nowhere') });
    expect(fromEnv.code).toBe(2);
    expect(fromEnv.err).toContain('(BATON_NATS_DIR)');
    expect(await readdir(root)).toEqual([]);
    const cwd = process.cwd();
    process.chdir(root);
    try {
      // The folder npm start and nats-config use: credentials made first are trusted once the server is configured from it.
      const fromDefault = await baton(['creds', 'agent', '--project', 'p1', '--agent', 'a1']);
      expect(fromDefault.code).toBe(0);
      expect(fromDefault.err).toContain(`baton: warning: no deployment in ${join(root, 'var', 'nats-auth')}`);
      expect(existsSync(join(root, 'var', 'nats-auth', 'deployment.json'))).toBe(true);
      const again = await baton(['creds', 'agent', '--project', 'p1', '--agent', 'a2']);
      expect({ code: again.code, warned: again.err.includes('warning') }).toEqual({ code: 0, warned: false });
    } finally {
      process.chdir(cwd);
    }
  });

  it('nats-config still makes the deployment, and creds then issues from it (signed by its account)', async () => {
    const dir = join(root, 'auth');
    const made = await baton(['nats-config', '--dir', dir, '--json']);
    expect(made.code).toBe(0);
    const deployment = JSON.parse(readFileSync(join(dir, 'deployment.json'), 'utf8')) as { account: string };
    expect(JSON.parse(made.out)).toMatchObject({ dir, account: deployment.account });

    const issued = await baton(['creds', 'agent', '--project', 'p1', '--agent', 'a1', '--dir', dir, '--json']);
    expect(issued.code).toBe(0);
    expect(JSON.parse(issued.out)).toMatchObject({ file: join(dir, 'creds', 'agents', 'p1', 'a1.creds') });
    const jwt = /-----BEGIN NATS USER JWT-----\n(.+)\n/.exec(readFileSync(join(dir, 'creds', 'agents', 'p1', 'a1.creds'), 'utf8'))?.[1] ?? '';
    const claims = JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString('utf8')) as { iss: string };
    expect(claims.iss).toBe(deployment.account);
    // The deployment was kept, not remade.
    expect(JSON.parse(readFileSync(join(dir, 'deployment.json'), 'utf8'))).toEqual(deployment);
  });
});

/**
 * `baton creds revoke` and `--rotate` on the deployment folder (no server: what reaches a running
 * nats-server on reload is proven by test/security/credential-revocation.e2e-spec.ts). Issuing
 * again for a principal says that the earlier credentials stay valid until revoked.
 */
describe('baton creds revoke and --rotate', () => {
  let root: string;
  let dir: string;

  const baton = (...argv: string[]) => batonIn(dir, argv);
  async function json<T>(...argv: string[]): Promise<T> {
    return jsonWarning<T>([], ...argv);
  }
  /** As `json`, the run warning of `codes` (stderr's one JSON line, with --json). */
  async function jsonWarning<T>(codes: string[], ...argv: string[]): Promise<T> {
    const run = await baton(...argv, '--json');
    expect({ code: run.code, warnings: warningCodes(run.err) }).toEqual({ code: 0, warnings: codes });
    return JSON.parse(run.out) as T;
  }
  const revocations = () => {
    const jwt = /^ {2}A[A-Z2-7]+: (\S+)$/m.exec(readFileSync(join(dir, 'auth.conf'), 'utf8'))?.[1] ?? '';
    const claims = JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString('utf8')) as {
      name: string;
      nats: { revocations?: Record<string, number> };
    };
    return claims.nats.revocations ?? {};
  };
  type Issued = { file: string; user: string; still_valid: string[]; revoked?: { user: string }[] };

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'baton-revoke-cli-'));
    dir = join(root, 'auth');
    expect((await baton('nats-config')).code).toBe(0);
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('issuing an agent again warns that the earlier credentials stay valid until revoked, naming their key (--json: still_valid)', async () => {
    const first = await json<Issued>('creds', 'agent', '--project', 'p1', '--agent', 'a1');
    expect(first.still_valid).toEqual([]);
    const again = await baton('creds', 'agent', '--project', 'p1', '--agent', 'a1');
    expect(again.code).toBe(0);
    expect(again.err).toContain(`baton: warning: the earlier credentials of agent p1/a1 stay valid until revoked (user ${first.user})`);
    expect(again.err).toContain('--rotate');
    // With --json the warning is stderr's JSON line, by its code; still_valid names the keys.
    const third = await jsonWarning<Issued>(['earlier_creds_valid'], 'creds', 'agent', '--project', 'p1', '--agent', 'a1');
    expect(third.still_valid).toHaveLength(2);
    expect(third.still_valid).toContain(first.user);
    expect(revocations()).toEqual({});
  });

  it('--rotate issues the new file and revokes every earlier key of the principal, not the new one', async () => {
    const first = await json<Issued>('creds', 'agent', '--project', 'p1', '--agent', 'a1');
    const second = await jsonWarning<Issued>(['earlier_creds_valid'], 'creds', 'agent', '--project', 'p1', '--agent', 'a1');
    const rotated = await json<Issued>('creds', 'agent', '--project', 'p1', '--agent', 'a1', '--rotate');
    expect(rotated.still_valid).toEqual([]);
    expect(rotated.revoked?.map((entry) => entry.user).sort()).toEqual([first.user, second.user].sort());
    expect(Object.keys(revocations()).sort()).toEqual([first.user, second.user].sort());
    expect(existsSync(rotated.file)).toBe(true);
    const prose = await baton('creds', 'agent', '--project', 'p1', '--agent', 'a1', '--rotate');
    expect(prose.out).toContain('rotated: the earlier user key(s) of agent p1/a1 are revoked');
    expect(prose.out).toContain('nats-server --signal reload=<pid>');
    // Where the new file is (the earlier one's path), and who picks it up without a restart: no
    // "give the new file to the process", which a running process cannot be given.
    expect(rotated.file).toBe(first.file);
    expect(prose.out).toContain(`The new credentials are in ${rotated.file}, where the earlier ones were.`);
    expect(prose.out).toContain('reads it again at every reconnect');
    expect(prose.out).toContain('A process given another file (a copy elsewhere) is refused from the reload on');
    expect(prose.out).not.toContain('Give the new file to the process');
  });

  it('revoke --project --agent revokes every key the agent was issued, removes its file and says how to apply it', async () => {
    const first = await json<Issued>('creds', 'agent', '--project', 'p1', '--agent', 'a1');
    const second = await jsonWarning<Issued>(['earlier_creds_valid'], 'creds', 'agent', '--project', 'p1', '--agent', 'a1');
    const other = await json<Issued>('creds', 'agent', '--project', 'p1', '--agent', 'a2');
    const run = await baton('creds', 'revoke', '--project', 'p1', '--agent', 'a1');
    expect(run.code).toBe(0);
    expect(run.out).toContain(`revoked agent p1/a1 in ${dir}: 2 user key(s) newly revoked, 0 revoked before`);
    expect(run.out).toContain(`user ${first.user} (agent:p1:a1)`);
    expect(run.out).toContain(`removed ${second.file} (its user is revoked)`);
    expect(run.out).toContain('kill -HUP <pid>');
    expect(run.out).toContain('baton creds agent --project p1 --agent a1');
    expect(Object.keys(revocations()).sort()).toEqual([first.user, second.user].sort());
    expect(existsSync(other.file)).toBe(true);

    // Again: nothing new, each key reported as revoked before, at its first time.
    const again = await json<{ revoked: { user: string; already_revoked: boolean }[]; removed_files: string[] }>(
      'creds',
      'revoke',
      '--project',
      'p1',
      '--agent',
      'a1',
    );
    expect(again.revoked.every((entry) => entry.already_revoked)).toBe(true);
    expect(again.removed_files).toEqual([]);
  });

  it('revoke --user revokes one key; --service revokes a service, whose file nats-config then issues again', async () => {
    const agent = await json<Issued>('creds', 'agent', '--project', 'p1', '--agent', 'a1');
    const byKey = await json<{ principal: null; revoked: { user: string; principal: string }[] }>('creds', 'revoke', '--user', agent.user);
    expect(byKey).toMatchObject({ principal: null, revoked: [{ user: agent.user, principal: 'agent:p1:a1' }] });

    const router = join(dir, 'creds', 'router.creds');
    const routerUser = decodeJwtClaims(jwtOfCreds(readFileSync(router, 'utf8')))['sub'] as string;
    const service = await json<{ removed_files: string[] }>('creds', 'revoke', '--service', 'router');
    expect(service.removed_files).toEqual([router]);
    expect(revocations()).toHaveProperty(routerUser);
    expect((await baton('nats-config')).code).toBe(0);
    expect(existsSync(router)).toBe(true);
    // The revocations survive nats-config writing the configuration again.
    expect(Object.keys(revocations()).sort()).toEqual([agent.user, routerUser].sort());
  });

  it('refuses, with nothing written: no selector or two, a key that is not a user key, --rotate, a folder without a deployment; an agent never issued is not_found', async () => {
    const record = () => readFileSync(join(dir, 'users.jsonl'), 'utf8');
    const before = record();
    for (const argv of [
      ['creds', 'revoke'],
      ['creds', 'revoke', '--admin', '--project', 'p1', '--agent', 'a1'],
      ['creds', 'revoke', '--user', 'UNOTAKEY'],
      ['creds', 'revoke', '--admin', '--rotate'],
      ['creds', 'revoke', '--project', 'p1'],
      ['creds', 'agent', '--project', 'p1', '--agent', 'a1', '--user', 'U'],
    ]) {
      const run = await baton(...argv);
      expect({ argv, code: run.code }).toEqual({ argv, code: 2 });
    }
    expect(record()).toBe(before);
    const nowhere = await main(['creds', 'revoke', '--admin', '--dir', join(root, 'nowhere'), '--json'], { io: bufferedIo(), env: { BATON_PREFIX: 'baton' } });
    expect(nowhere).toBe(2);
    expect(existsSync(join(root, 'nowhere'))).toBe(false);

    const missing = await baton('creds', 'revoke', '--project', 'p1', '--agent', 'ghost', '--json');
    expect(missing.code).toBe(1);
    expect(JSON.parse(missing.err)).toMatchObject({
      error: { code: 'not_found', details: { dir, principal: { kind: 'agent', project: 'p1', agent: 'ghost' } } },
    });
    expect(record()).toBe(before);
  });
});

/**
 * nats-server refuses a configuration reload whose listen, http or store_dir differs from what it
 * started with, and then applies nothing of the file — a revocation included. `baton nats-config`
 * run again without those options (as the upgrade notes say to) keeps what the nats-server.conf in
 * the folder names (npm start writes its own port and var/nats there), and an option that changes
 * one warns that a running server must be restarted. What a reload then does is proven against a
 * nats-server by test/security/credential-revocation.e2e-spec.ts.
 */
describe('baton nats-config run again keeps the listeners and the JetStream folder', () => {
  let root: string;
  let dir: string;

  const baton = (...argv: string[]) => batonIn(dir, argv);
  type Summary = {
    listen: string;
    store_dir: string;
    http: string | null;
    kept: string[];
    changed: { setting: string; from: string | null; to: string | null }[];
  };
  async function config(...argv: string[]): Promise<Summary> {
    return configWarning([], ...argv);
  }
  /** As `config`, the run warning of `codes` (stderr's one JSON line, with --json). */
  async function configWarning(codes: string[], ...argv: string[]): Promise<Summary> {
    const run = await baton('nats-config', ...argv, '--json');
    expect({ code: run.code, warnings: warningCodes(run.err) }).toEqual({ code: 0, warnings: codes });
    return JSON.parse(run.out) as Summary;
  }
  const conf = () => readFileSync(join(dir, 'nats-server.conf'), 'utf8');
  /** The lines nats-server cannot take on a reload. */
  const listeners = () =>
    conf()
      .split('\n')
      .filter((line) => /^\s*(listen|http|store_dir):/.test(line));

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'baton-nats-config-'));
    dir = join(root, 'auth');
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('the first run writes the defaults; a plain run after npm start’s keeps its listen and store_dir (and a revocation after it keeps them too)', async () => {
    const first = await config();
    expect(first).toMatchObject({ listen: '127.0.0.1:4222', store_dir: join(dir, 'jetstream'), http: null, kept: [], changed: [] });

    // What npm start runs: its own port and var/nats.
    const store = join(root, 'var', 'nats');
    await configWarning(['restart_required'], '--listen', '127.0.0.1:4317', '--store-dir', store);
    const started = listeners();
    expect(started).toEqual(['listen: "127.0.0.1:4317"', `  store_dir: ${JSON.stringify(store)}`]);

    // The operator's later plain run: the same listener lines, so a reload is not refused.
    const again = await config();
    expect(again).toMatchObject({ listen: '127.0.0.1:4317', store_dir: store, http: null, kept: ['listen', 'store_dir', 'http'], changed: [] });
    expect(listeners()).toEqual(started);
    const prose = await baton('nats-config');
    expect(prose.code).toBe(0);
    expect(prose.err).toBe('');
    expect(prose.out).toContain(`listen 127.0.0.1:4317, store_dir ${store}, http none (kept from the configuration it replaced: listen, store_dir, http)`);

    expect((await baton('creds', 'agent', '--project', 'loans', '--agent', 'Loan_Supervisor')).code).toBe(0);
    expect((await baton('creds', 'revoke', '--project', 'loans', '--agent', 'Loan_Supervisor')).code).toBe(0);
    expect(listeners()).toEqual(started);
  });

  it('a monitoring listener is kept too; --http none removes it', async () => {
    await config('--http', '127.0.0.1:8222');
    expect(await config()).toMatchObject({ http: '127.0.0.1:8222', changed: [] });
    expect(conf()).toContain('http: "127.0.0.1:8222"');
    expect(await configWarning(['restart_required'], '--http', 'none')).toMatchObject({
      http: null,
      changed: [{ setting: 'http', from: '127.0.0.1:8222', to: null }],
    });
    expect(conf()).not.toMatch(/^http:/m);
  });

  it('an option that changes a setting of the file it replaces warns that a running server must be restarted, not reloaded (--json: changed)', async () => {
    await config('--listen', '127.0.0.1:4317');
    const store = join(root, 'elsewhere');
    const moved = await baton('nats-config', '--listen', '127.0.0.1:4318', '--store-dir', store);
    expect(moved.code).toBe(0);
    expect(moved.err).toContain(
      `baton: warning: ${join(dir, 'nats-server.conf')}: listen from 127.0.0.1:4317 to 127.0.0.1:4318, store_dir from ${join(dir, 'jetstream')} to ${store}`,
    );
    expect(moved.err).toContain('must be restarted');
    expect(moved.err).toContain('a reload (nats-server --signal reload, kill -HUP) is refused');
    expect(moved.err).toContain('JetStream data stays in the former store_dir');
    expect(listeners()).toEqual(['listen: "127.0.0.1:4318"', `  store_dir: ${JSON.stringify(store)}`]);

    const json = await configWarning(['restart_required'], '--listen', '127.0.0.1:4319');
    expect(json.changed).toEqual([{ setting: 'listen', from: '127.0.0.1:4318', to: '127.0.0.1:4319' }]);
    expect(json.kept).toEqual(['store_dir', 'http']);
    // The same value again changes nothing: no warning.
    expect((await baton('nats-config', '--listen', '127.0.0.1:4319')).err).toBe('');
  });

  it('a file without a listen or store_dir it can read: the default is written, with a warning', async () => {
    await config('--listen', '127.0.0.1:4317');
    await writeFile(join(dir, 'nats-server.conf'), conf().replace(/^listen: .*$/m, 'port: 4317'));
    const run = await baton('nats-config');
    expect(run.code).toBe(0);
    expect(run.err).toContain('named no listen nats-config could read: the default is written (listen 127.0.0.1:4222)');
    expect(listeners()[0]).toBe('listen: "127.0.0.1:4222"');
    // With --json: stderr's one JSON line, by its code.
    await writeFile(join(dir, 'nats-server.conf'), conf().replace(/^listen: .*$/m, 'port: 4317'));
    const typed = await baton('nats-config', '--json');
    expect(typed.code).toBe(0);
    expect(JSON.parse(typed.err)).toEqual({
      warnings: [{ code: 'server_config_unread', message: expect.stringContaining('named no listen nats-config could read') }],
    });
  });
});

/** `baton creds revoke` names the nats-server npm start runs from the folder (local.json), to reload and read the log of. */
describe('baton creds revoke under npm start', () => {
  let root: string;
  let dir: string;

  const baton = (...argv: string[]) => batonIn(dir, argv);

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'baton-revoke-local-'));
    dir = join(root, 'auth');
    expect((await baton('nats-config')).code).toBe(0);
    expect((await baton('creds', 'agent', '--project', 'p1', '--agent', 'a1')).code).toBe(0);
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('prints the running server’s pid and log, and says what a refused reload looks like', async () => {
    // A process that /proc names nats-server stands in for the running one.
    const bin = join(root, 'nats-server');
    await symlink(process.execPath, bin);
    const stand = spawn(bin, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    try {
      const pid = stand.pid ?? 0;
      const log = join(root, 'var', 'nats-server.log');
      await writeFile(
        join(dir, 'local.json'),
        JSON.stringify({ url: 'nats://127.0.0.1:4317', creds: { admin: join(dir, 'creds', 'admin.creds') }, nats_server: { pid, log } }),
      );
      const run = await baton('creds', 'revoke', '--project', 'p1', '--agent', 'a1');
      expect(run.code).toBe(0);
      expect(run.out).toContain(`npm start runs this folder's nats-server: nats-server --signal reload=${pid} (its log: ${log})`);
      expect(run.out).toContain('"Failed to reload');
      expect(run.out).toContain('applied nothing, the revocation included: restart it instead');
      const json = await baton('creds', 'revoke', '--project', 'p1', '--agent', 'a1', '--json');
      expect(JSON.parse(json.out)).toMatchObject({ local_server: { pid, log } });
    } finally {
      stand.kill('SIGKILL');
    }
  });

  it('a local.json whose server is gone, whose pid another process has now, or none: no pid is named', async () => {
    const local = (pid: number) =>
      writeFile(
        join(dir, 'local.json'),
        JSON.stringify({ url: 'nats://127.0.0.1:4317', creds: { admin: join(dir, 'creds', 'admin.creds') }, nats_server: { pid, log: 'x' } }),
      );
    for (const pid of [2 ** 22 + 1, ...(process.platform === 'linux' ? [process.pid] : [])]) {
      await local(pid);
      const run = await baton('creds', 'revoke', '--project', 'p1', '--agent', 'a1', '--json');
      expect({ pid, local_server: (JSON.parse(run.out) as { local_server: unknown }).local_server }).toEqual({ pid, local_server: null });
      // Why none is named: local.json's pid runs no nats-server (restarted by hand), typed.
      expect(JSON.parse(run.err)).toEqual({
        warnings: [
          {
            code: 'local_server_not_running',
            message: expect.stringContaining(`names npm start's nats-server as pid ${pid}, and no nats-server runs at that pid`),
            details: { pid, log: 'x' },
          },
        ],
      });
      const prose = await baton('creds', 'revoke', '--project', 'p1', '--agent', 'a1');
      expect(prose.err).toContain(`baton: warning: ${join(dir, 'local.json')} names npm start's nats-server as pid ${pid}`);
      expect(prose.err).toContain('pgrep -a nats-server');
      // --rotate (of a key still valid) says the same.
      expect((await baton('creds', 'agent', '--project', 'p1', '--agent', 'a1')).code).toBe(0);
      const rotated = await baton('creds', 'agent', '--project', 'p1', '--agent', 'a1', '--rotate', '--json');
      expect(JSON.parse(rotated.err)).toMatchObject({ warnings: [{ code: 'local_server_not_running', details: { pid } }] });
    }
    await rm(join(dir, 'local.json'));
    const none = await baton('creds', 'revoke', '--project', 'p1', '--agent', 'a1');
    expect(none.out).not.toContain('npm start runs');
    expect(none.err).not.toContain('local.json');
  });
});
