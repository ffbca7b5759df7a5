import { API_COMMANDS } from './api';
import { commands } from './commands';
import { HELP_GROUPS, main } from './main';
import { bufferedIo } from './output';

describe('baton help', () => {
  it('lists every command under exactly one heading, and names no command that does not exist', () => {
    const listed = HELP_GROUPS.flatMap(([, names]) => names);
    expect([...listed].sort()).toEqual(commands.map((c) => c.name).sort());
    expect(new Set(listed).size).toBe(listed.length);
  });

  it('Environment names the commands that call the operator API under BATON_TOKEN and BATON_API_URL: answer, answer-hold, decide, abandon and notice redeliver', async () => {
    const io = bufferedIo();
    expect(await main(['help'], { io })).toBe(0);
    const environment = io.out().split('\nEnvironment:\n')[1]!.split('\n\n')[0]!;
    // Each variable's entry: its line and the indented lines under it, on one line.
    const entry = (name: string) =>
      environment
        .split(/\n(?= {2}[A-Z])/)
        .find((e) => e.trimStart().startsWith(`${name} `) || e.trimStart().startsWith(`${name}\n`))!
        .replace(/\s+/g, ' ');
    const named = 'answer, answer-hold, decide, abandon and notice redeliver';
    expect(entry('BATON_TOKEN')).toContain(`the operator API token ${named} send`);
    expect(entry('BATON_API_URL')).toContain(`the notifier's operator API, which ${named} call`);
    expect(API_COMMANDS).toEqual(['answer', 'answer-hold', 'decide', 'abandon', 'notice redeliver']);
  });

  it('each command it names sends BATON_TOKEN: unset, it sends nothing and fails unauthenticated (details.reason missing)', async () => {
    const argv: Record<(typeof API_COMMANDS)[number], string[]> = {
      answer: ['answer', 'stop-1', '--project', 'p', '--action', 'deny'],
      'answer-hold': ['answer-hold', 'wr-1', '--project', 'p', '--action', 'terminate'],
      decide: ['decide', 'hb-1', 'accept', '--project', 'p'],
      abandon: ['abandon', 'ho-1', '--project', 'p', '--reason', 'x'],
      'notice redeliver': ['notice', 'redeliver', 'nt-1', '--project', 'p'],
    };
    const fetched: string[] = [];
    const fetch = (async (url: string) => {
      fetched.push(url);
      return new Response('{}', { status: 500 });
    }) as unknown as typeof globalThis.fetch;
    for (const name of API_COMMANDS) {
      const io = bufferedIo();
      const code = await main([...argv[name], '--json'], { io, fetch, env: { BATON_API_URL: 'http://127.0.0.1:1' } });
      expect({ name, code, error: (JSON.parse(io.err()) as { error: unknown }).error }).toMatchObject({
        name,
        code: 1,
        error: { code: 'unauthenticated', details: { reason: 'missing' } },
      });
    }
    expect(fetched).toEqual([]);
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
