import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from './main';
import { bufferedIo } from './output';

/*
 * On-call ergonomics found by a black-box audit (REPORT-OPS F3, F5, F7):
 * - F3: with `npm start` stopped (local.json gone) the CLI reads the default servers, which on a
 *   shared machine are another deployment's: it says so (`default_server_read`), naming the server,
 *   and a missing stream names the NATS it was looked for on.
 * - F5: `answer-hold` and `decide` take the inbox item id `baton inbox` prints (or refuse another
 *   kind's as a usage error naming the command), never answering it `not_found`.
 * - F7: a filter value the API refuses is a usage error (exit 2), not an empty listing.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

interface Warning {
  code: string;
  message: string;
  details?: Record<string, unknown>;
}

/** The warnings of a `--json` run: its warnings line, or its failure's `details.warnings`. */
function warningsOf(err: string): Warning[] {
  return err
    .split('\n')
    .filter((line) => line.trim() !== '')
    .flatMap((line) => {
      const parsed = JSON.parse(line) as { warnings?: Warning[]; error?: { details?: { warnings?: Warning[] } } };
      return parsed.warnings ?? parsed.error?.details?.warnings ?? [];
    });
}

describe('the CLI with npm start stopped: a deployment folder without local.json (F3)', () => {
  let dir: string;
  let prefix: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'baton-stopped-'));
    // What `baton nats-config` and `npm start` leave behind once npm start has stopped.
    await writeFile(join(dir, 'nats-server.conf'), 'listen: "127.0.0.1:4222"\ninclude ./auth.conf\n');
    await writeFile(join(dir, 'npm-start.json'), '{}\n');
    prefix = `t${randomBytes(5).toString('hex')}`;
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reading NATS at the default warns default_server_read naming the server and why; the missing stream names that NATS', async () => {
    // Read only: an unknown prefix on whatever answers at the default NATS URL.
    const io = bufferedIo();
    const code = await main(['streams', '--json'], { io, env: { BATON_NATS_DIR: dir, BATON_PREFIX: prefix, BATON_NATS_AUTH: 'none' } });
    const failure = JSON.parse(io.err()) as { error: { code: string; message: string; details: Record<string, unknown> } };
    // Whatever answered there (a shared server: not_found, exit 1; none: unavailable, exit 69), the warning says which server was read.
    expect(['not_found', 'unavailable']).toContain(failure.error.code);
    expect(code).toBe(failure.error.code === 'unavailable' ? 69 : 1);
    expect(warningsOf(io.err())).toEqual([
      {
        code: 'default_server_read',
        message: expect.stringContaining(
          `reading NATS at nats://127.0.0.1:4222, the default: ${dir} holds a deployment (nats-server.conf, npm-start.json) but no local.json: npm start is not running`,
        ),
        details: {
          server: 'nats',
          url: 'nats://127.0.0.1:4222',
          setting: 'NATS_URL',
          deployment_dir: dir,
          found: ['nats-server.conf', 'npm-start.json'],
          local_json: 'missing',
        },
      },
    ]);
    if (failure.error.code === 'not_found') {
      expect(failure.error.message).toContain('on NATS at nats://127.0.0.1:4222');
      expect(failure.error.details).toMatchObject({ nats_url: 'nats://127.0.0.1:4222' });
    }

    // Without --json: a prose warning on stderr before the failure.
    const prose = bufferedIo();
    await main(['streams'], { io: prose, env: { BATON_NATS_DIR: dir, BATON_PREFIX: prefix, BATON_NATS_AUTH: 'none' } });
    expect(prose.err()).toContain('baton: warning: reading NATS at nats://127.0.0.1:4222, the default:');
    expect(prose.err()).toContain('Start the platform (npm start), or set NATS_URL and NATS_CREDS to the one meant');
  });

  it('reading Redis at the default warns too (an empty inbox says which Redis it is empty in); REDIS_URL set: no such warning', async () => {
    const env = { BATON_NATS_DIR: dir, BATON_PREFIX: prefix, BATON_PROJECTION_PREFIX: `${prefix}:proj` };
    const io = bufferedIo();
    await main(['inbox', '--json'], { io, env });
    const warnings = warningsOf(io.err());
    expect(warnings[0]).toEqual({
      code: 'default_server_read',
      message: expect.stringContaining('reading Redis at redis://127.0.0.1:6379, the default:'),
      details: expect.objectContaining({ server: 'redis', url: 'redis://127.0.0.1:6379', setting: 'REDIS_URL', local_json: 'missing' }),
    });
    // Read at a Redis that answered: the unbuilt projection names that Redis too.
    for (const warning of warnings.filter((w) => w.code === 'projection_not_built')) expect(warning.message).toContain(`in Redis at redis://127.0.0.1:6379`);

    const given = bufferedIo();
    expect(await main(['inbox', '--json'], { io: given, env: { ...env, REDIS_URL } })).toBe(0);
    expect(warningsOf(given.err()).map((w) => w.code)).toEqual(['projection_not_built']);
  });

  it('calling the operator API at its default warns, naming it (no request leaves this process: fetch is a stand-in)', async () => {
    const urls: string[] = [];
    const fetch = (async (url: string) => {
      urls.push(url);
      return new Response('{"error":{"code":"unavailable","message":"x","issues":[]}}', { status: 503, headers: { 'content-type': 'application/json' } });
    }) as unknown as typeof globalThis.fetch;
    const io = bufferedIo();
    const code = await main(['answer-hold', 'wr-1', '--project', 'p', '--action', 'terminate', '--json'], {
      io,
      fetch,
      env: { BATON_NATS_DIR: dir, BATON_TOKEN: 'bt_x' },
    });
    expect(code).toBe(69);
    expect(urls).toEqual(['http://127.0.0.1:7100/v1/projects/p/runs/wr-1/answer']);
    expect(warningsOf(io.err())).toEqual([
      expect.objectContaining({
        code: 'default_server_read',
        details: expect.objectContaining({ server: 'api', url: 'http://127.0.0.1:7100', setting: 'BATON_API_URL' }),
      }),
    ]);
  });

  it('a local.json npm start did not write counts as none (local_json: unreadable); no deployment folder, or NATS_URL set: no warning', async () => {
    await writeFile(join(dir, 'local.json'), 'not json');
    const broken = bufferedIo();
    await main(['inbox', '--json'], { io: broken, env: { BATON_NATS_DIR: dir, BATON_PROJECTION_PREFIX: `${prefix}:proj` } });
    expect(warningsOf(broken.err())[0]).toMatchObject({
      code: 'default_server_read',
      message: expect.stringContaining('its local.json is not one npm start wrote'),
      details: { local_json: 'unreadable' },
    });

    const empty = await mkdtemp(join(tmpdir(), 'baton-nodeployment-'));
    try {
      const none = bufferedIo();
      await main(['inbox', '--json'], { io: none, env: { BATON_NATS_DIR: empty, BATON_PROJECTION_PREFIX: `${prefix}:proj` } });
      expect(warningsOf(none.err()).map((w) => w.code)).not.toContain('default_server_read');
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
    const set = bufferedIo();
    await main(['streams', '--json'], { io: set, env: { BATON_NATS_DIR: dir, NATS_URL, REDIS_URL, BATON_PREFIX: prefix } });
    expect(warningsOf(set.err()).map((w) => w.code)).not.toContain('default_server_read');
  });
});

describe('answer, answer-hold and decide given the inbox item id baton inbox prints (F5; a real HTTP server stands in for the API)', () => {
  let server: Server;
  let apiUrl: string;
  const requests: string[] = [];

  async function baton(...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, {
      io,
      env: { NATS_URL: 'nats://127.0.0.1:1', REDIS_URL: 'redis://127.0.0.1:1', BATON_API_URL: apiUrl, BATON_TOKEN: 'bt_x' },
    });
    return { code, out: io.out(), err: io.err() };
  }

  beforeAll(async () => {
    server = createServer((req: IncomingMessage, res) => {
      req.resume();
      req.on('end', () => {
        requests.push(`${req.method} ${req.url}`);
        res.writeHead(200, { 'content-type': 'application/json' });
        const path = req.url ?? '';
        if (/\/decision$/.test(path)) {
          res.end(
            JSON.stringify({
              outcome: 'applied',
              handoff: { id: decodeURIComponent(path.split('/').at(-2)!), project: 'ops', status: 'completed' },
              events: 1,
            }),
          );
          return;
        }
        const run = decodeURIComponent(path.split('/').at(-2)!);
        res.end(
          JSON.stringify({
            accepted: true,
            answer_id: 'a-1',
            project: 'ops',
            workflow_run_id: run,
            subject: 'x.in.ops.answer',
            duplicate: false,
            status_url: `/v1/projects/ops/runs/${run}/answers/a-1`,
            outcome: 'applied',
            run: { status: 'running' },
          }),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  beforeEach(() => {
    requests.length = 0;
  });

  it("answer-hold hold:<seq>:<project>:<run> answers that project's run (the run id may hold ':')", async () => {
    const answered = await baton('answer-hold', 'hold:445:ops:adv-g1', '--action', 'continue', '--json');
    expect({ code: answered.code, err: answered.err }).toEqual({ code: 0, err: '' });
    expect(requests).toEqual(['POST /v1/projects/ops/runs/adv-g1/answer']);
    requests.length = 0;
    expect((await baton('answer-hold', 'hold:7:ops:wr:a:b', '--action', 'terminate', '--project', 'ops')).code).toBe(0);
    expect(requests).toEqual(['POST /v1/projects/ops/runs/wr%3Aa%3Ab/answer']);
  });

  it("decide handback:<project>:<handoff> decides that project's handback", async () => {
    const decided = await baton('decide', 'handback:ops:hb-45a4ccff46934f579e6d9e11b7b7871a', 'accept');
    expect(decided).toMatchObject({ code: 0, out: 'accepted: hb-45a4ccff46934f579e6d9e11b7b7871a (project ops)\n' });
    expect(requests).toEqual(['POST /v1/projects/ops/handoffs/hb-45a4ccff46934f579e6d9e11b7b7871a/decision']);
  });

  it('another kind’s item id, or a --project naming another project, is a usage error (exit 2) naming what to run; nothing is sent', async () => {
    const cases: [string[], string][] = [
      [
        ['answer-hold', 'stop:ops:pk-1', '--action', 'continue'],
        'stop:ops:pk-1 is the inbox item of a stop, not a held run: baton answer pk-1 --project ops --action …',
      ],
      [
        ['answer-hold', 'handback:ops:hb-1', '--action', 'continue'],
        'handback:ops:hb-1 is the inbox item of a handback, not a held run: baton decide hb-1 accept|rework --project ops',
      ],
      [['decide', 'hold:3:ops:wr-1', 'accept'], 'hold:3:ops:wr-1 is the inbox item of a hold, not a handback: baton answer-hold wr-1 --project ops --action …'],
      [['decide', 'stop:ops:pk-1', 'accept'], 'stop:ops:pk-1 is the inbox item of a stop, not a handback: baton answer pk-1 --project ops --action …'],
      [
        ['decide', 'escalation:ops:ho-1', 'accept'],
        'escalation:ops:ho-1 is the inbox item of an escalation, not a handback: nothing in the inbox answers an escalation',
      ],
      [
        ['answer', 'hold:3:ops:wr-1', '--action', 'deny'],
        'hold:3:ops:wr-1 is the inbox item of a hold, not a stop packet: baton answer-hold wr-1 --project ops',
      ],
      [['answer-hold', 'hold:445:ops:adv-g1', '--action', 'continue', '--project', 'alpha'], 'hold:445:ops:adv-g1 is an inbox item of project ops, not alpha'],
      [['decide', 'handback:ops:hb-1', 'accept', '--project', 'alpha'], 'handback:ops:hb-1 is an inbox item of project ops, not alpha'],
    ];
    for (const [argv, said] of cases) {
      const typed = await baton(...argv, '--json');
      expect({ argv, code: typed.code, out: typed.out, error: JSON.parse(typed.err) as unknown }).toEqual({
        argv,
        code: 2,
        out: '',
        error: { error: { code: 'usage', message: expect.stringContaining(said), issues: [] } },
      });
    }
    expect(requests).toEqual([]);
  });
});

describe('listing filters the API would refuse are usage errors (F7)', () => {
  async function baton(...argv: string[]) {
    const io = bufferedIo();
    // Nothing listens on these: a command that got as far as reading would fail otherwise.
    const code = await main(argv, { io, env: { NATS_URL: 'nats://127.0.0.1:1', REDIS_URL: 'redis://127.0.0.1:1', BATON_API_URL: 'http://127.0.0.1:1' } });
    return { code, out: io.out(), err: io.err() };
  }

  it('inbox --agent takes an actor name, stops --agent an agent name and --run an id, as GET /v1/inbox and /v1/stops do', async () => {
    const cases: [string[], string][] = [
      [['inbox', '--agent', 'a b'], '--agent "a b": actor names may hold letters, digits and _ - . : @ only'],
      [['inbox', '--agent', 'ok,a*b'], '--agent "a*b": actor names may hold letters, digits and _ - . : @ only'],
      [['stops', '--agent', 'a b'], '--agent "a b": agent names may hold letters, digits, _ and - only'],
      [['stops', '--agent', 'a.b'], '--agent "a.b": agent names may hold letters, digits, _ and - only'],
      [['stops', '--run', 'wr 1'], '--run "wr 1": ids may hold letters, digits and _ - : @ only'],
    ];
    for (const [argv, said] of cases) {
      const typed = await baton(...argv, '--json');
      expect({ argv, code: typed.code, out: typed.out, error: JSON.parse(typed.err) as unknown }).toEqual({
        argv,
        code: 2,
        out: '',
        error: { error: { code: 'usage', message: expect.stringContaining(said), issues: [] } },
      });
    }
    // Names the API takes get as far as reading (here: no Redis, unavailable: exit 69), not refused as usage.
    expect((await baton('inbox', '--agent', 'olga@ops.example', '--json')).code).toBe(69);
    expect((await baton('stops', '--agent', 'support', '--run', 'wr:1', '--json')).code).toBe(69);
  });
});
