import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from './main';
import { bufferedIo } from './output';

/**
 * Command lines the CLI refuses before it connects anywhere or writes anything: what they say
 * names what is wrong (the missing argument, the option), and a file where a folder belongs is a
 * typed failure, not a bare errno.
 */
describe('command lines refused before anything is done', () => {
  let dir: string;

  async function baton(...argv: string[]) {
    const io = bufferedIo();
    // Nothing listens on these: a command that got as far as connecting would fail otherwise.
    const code = await main(argv, { io, env: { NATS_URL: 'nats://127.0.0.1:1', REDIS_URL: 'redis://127.0.0.1:1', BATON_API_URL: 'http://127.0.0.1:1' } });
    return { code, out: io.out(), err: io.err() };
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'baton-cli-usage-'));
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('a missing argument is named (the project, the handoff id, the decision…)', async () => {
    const cases: [string[], string][] = [
      [['decide'], 'missing <handoff-id>'],
      [['decide', 'hb-1'], 'missing the decision, accept or rework'],
      [['pause'], 'missing <project>'],
      [['project'], 'missing <project>'],
      [['abandon', '--reason', 'x'], 'missing <handoff-id>'],
      [['answer', '--action', 'deny'], 'missing <stop-id>'],
      [['run'], 'missing <id> (the workflow_run_id)'],
      [['creds'], 'missing what to do: agent, service or admin (issue), or revoke'],
    ];
    for (const [argv, said] of cases) {
      const typed = await baton(...argv, '--json');
      expect({ argv, code: typed.code, error: JSON.parse(typed.err) as unknown }).toEqual({
        argv,
        code: 2,
        error: { error: { code: 'usage', message: said, issues: [] } },
      });
    }
  });

  it('inbox and stops refuse a --project that is not a project key (exit 2), as run, token and creds do', async () => {
    for (const command of ['inbox', 'stops']) {
      const typed = await baton(command, '--project', 'BAD', '--json');
      expect({ command, code: typed.code, out: typed.out }).toEqual({ command, code: 2, out: '' });
      expect(JSON.parse(typed.err)).toMatchObject({
        error: { code: 'usage', message: '--project "BAD" is not a project key (lowercase letters, digits, _ and -)' },
      });
      expect((await baton(command, '--project', 'ok-one,Not OK')).code).toBe(2);
    }
  });

  it('nats-config refuses a --listen or --http that is not host:port with a port from 1 to 65535, naming the option, and writes nothing', async () => {
    const folder = join(dir, 'deployment');
    for (const [option, value] of [
      ['--listen', '127.0.0.1:99999'],
      ['--listen', ':4222'],
      ['--listen', '127.0.0.1:0'],
      ['--http', '127.0.0.1:99999'],
      ['--http', 'garbage'],
      ['--http', '127.0.0.1:8222x'],
    ] as const) {
      const typed = await baton('nats-config', '--dir', folder, option, value, '--json');
      expect({ option, value, code: typed.code }).toEqual({ option, value, code: 2 });
      expect(JSON.parse(typed.err)).toMatchObject({ error: { code: 'usage', message: expect.stringContaining(`${option} must be host:port`) } });
      expect(existsSync(folder)).toBe(false);
    }
    const made = await baton('nats-config', '--dir', folder, '--listen', 'localhost:4333', '--http', '[::1]:8222', '--json');
    expect(made.code).toBe(0);
    expect(JSON.parse(made.out)).toMatchObject({ listen: 'localhost:4333' });
  });

  it('a file where a folder belongs is invalid_input saying so: schemas --out <file>, nats-config --dir <file>', async () => {
    const file = join(dir, 'a-file');
    await writeFile(file, 'not a folder\n');
    const schemas = await baton('schemas', '--out', file);
    expect(schemas).toEqual({
      code: 1,
      out: '',
      err: `baton schemas: --out ${file} is not a folder (it, or a folder above it, is a file): name a folder for the schemas\n`,
    });
    expect((await baton('schemas', '--out', join(file, 'below'))).err).toContain('is not a folder (it, or a folder above it, is a file)');
    const config = await baton('nats-config', '--dir', file);
    expect(config.code).toBe(1);
    expect(config.err).toBe(
      `baton nats-config: ${file} (--dir) is not a folder (it, or a folder above it, is a file): name a folder for the deployment; nothing was written\n`,
    );
    const under = await baton('nats-config', '--dir', join(file, 'below'), '--json');
    expect(JSON.parse(under.err)).toMatchObject({ error: { code: 'invalid_input' } });
  });
});
