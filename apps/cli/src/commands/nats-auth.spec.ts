import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../main';
import { bufferedIo } from '../output';

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
