import { commands } from './commands';
import { HELP_GROUPS, main } from './main';

describe('baton help', () => {
  it('lists every command under exactly one heading, and names no command that does not exist', () => {
    const listed = HELP_GROUPS.flatMap(([, names]) => names);
    expect([...listed].sort()).toEqual(commands.map((c) => c.name).sort());
    expect(new Set(listed).size).toBe(listed.length);
  });
});

describe('command help', () => {
  const help = (name: string) => commands.find((c) => c.name === name)!.help;

  it('inbox --help lists every why an escalation has (offer_given_up too) and the form of each item id', () => {
    expect(help('inbox')).toContain('lease_expired, rework, offer_given_up for an escalation');
    expect(help('inbox')).toContain('hold:<seq>:<project>:<workflow_run_id>');
  });

  it('pause and resume have an Options section (--reason, --key, --json; --force for pause); decide names --key in its usage', () => {
    for (const name of ['pause', 'resume']) {
      const options = help(name).split('\nOptions:\n')[1] ?? '';
      expect({ name, options: ['--reason', '--key', '--json'].filter((option) => !options.includes(option)) }).toEqual({ name, options: [] });
    }
    expect(help('pause').split('\nOptions:\n')[1]).toContain('--force');
    expect(help('decide').split('\n')[0]).toContain('[--key k]');
  });

  it('token --help says what revoke --json prints', () => {
    expect(help('token')).toContain('baton token revoke <token_id> [--json]');
    expect(help('token')).toContain('{ token_id, name, revoked_at, already_revoked }');
  });
});

describe('an unknown command', () => {
  const run = async (argv: string[]) => {
    let out = '';
    let err = '';
    const code = await main(argv, { io: { stdout: { write: (t: string) => (out += t) }, stderr: { write: (t: string) => (err += t) }, stderrIsTTY: false } });
    return { code, out, err };
  };

  it('with --json is one JSON line on stderr with code usage, exit 2 (as every --json failure)', async () => {
    const { code, out, err } = await run(['bogus-cmd', '--json']);
    expect(code).toBe(2);
    expect(out).toBe('');
    expect(err.trim().split('\n')).toHaveLength(1);
    expect(JSON.parse(err)).toEqual({ error: { code: 'usage', message: expect.stringContaining('bogus-cmd'), issues: [] } });
  });

  it('without --json names it and prints the help, exit 2', async () => {
    const { code, err } = await run(['bogus-cmd']);
    expect(code).toBe(2);
    expect(err).toContain('unknown command "bogus-cmd"');
  });
});

describe('an unknown option', () => {
  it('is a usage error (exit 2) that names the options the command takes, with no unbalanced quotes', async () => {
    let err = '';
    const code = await main(['dlq', 'list', '--until', '3'], {
      io: { stdout: { write: () => undefined }, stderr: { write: (t: string) => (err += t) }, stderrIsTTY: false },
    });
    expect(code).toBe(2);
    expect(err).toContain('unknown option --until (this command takes --source, --reason, --project, --run, --handoff, --json, --help)');
    expect(err).not.toContain(`'-- "--until"`);
  });
});
