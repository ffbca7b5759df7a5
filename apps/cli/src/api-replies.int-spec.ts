import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { main } from './main';
import { bufferedIo } from './output';

/**
 * What the CLI makes of replies that are not the operator API's: BATON_API_URL pointing at a login
 * page, a proxy, or another HTTP service. A 2xx is not success unless its body is the route's reply
 * (`bad_reply`); an error status without the API's error body is not a refusal by Baton, so no
 * code is made up from the status (`unavailable` for 502/503/504, else `bad_reply`), and nothing
 * that is not the API's is printed on stdout as its reply. A 401 says what to do about BATON_TOKEN;
 * without BATON_TOKEN nothing is sent at all.
 *
 * A real HTTP server stands in for whatever answers at BATON_API_URL; each test says how it answers.
 */
describe('baton answer / answer-hold / decide / abandon when BATON_API_URL does not answer as the operator API (a real HTTP server)', () => {
  let server: Server;
  let apiUrl: string;
  let answer: (req: IncomingMessage, res: ServerResponse) => void = () => undefined;
  /** The requests that reached the server. */
  let received = 0;

  async function baton(argv: string[], env: Record<string, string> = { BATON_TOKEN: 'bt_some' }) {
    const io = bufferedIo();
    const code = await main(argv, { io, env: { BATON_API_URL: apiUrl, ...env } });
    return { code, out: io.out(), err: io.err() };
  }

  const reply = (status: number, contentType: string, body: string) => (_req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(status, { 'content-type': contentType });
    res.end(body);
  };

  beforeAll(async () => {
    server = createServer((req, res) => {
      received += 1;
      req.resume();
      req.on('end', () => answer(req, res));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const LOGIN_PAGE = '<!doctype html><html><head><title>Sign in</title></head><body><form method="post">…</form></body></html>';

  /** Every command that acts through the API, as an operator would type it. */
  const ACTIONS: ReadonlyArray<readonly string[]> = [
    ['abandon', 'ho-x', '--project', 'p', '--reason', 'x'],
    ['decide', 'hb-1', 'accept', '--project', 'p'],
    ['answer', 'stop-1', '--project', 'p', '--action', 'deny'],
    ['answer-hold', 'wr-1', '--project', 'p', '--action', 'terminate'],
  ];

  it('an HTML 200 (a login page, a proxy) is bad_reply (exit 1) naming the URL, with http_status and content_type; nothing on stdout', async () => {
    answer = reply(200, 'text/html; charset=utf-8', LOGIN_PAGE);
    const prose = await baton(['abandon', 'ho-x', '--project', 'p', '--reason', 'x']);
    expect(prose).toMatchObject({ code: 1, out: '' });
    expect(prose.err).toContain(
      `baton abandon: the server at BATON_API_URL (${apiUrl}) did not answer POST /v1/projects/p/handoffs/ho-x/abandon as Baton's operator API: HTTP 200 (text/html; charset=utf-8)`,
    );
    expect(prose.err).not.toContain('abandoned');
    for (const argv of ACTIONS) {
      const typed = await baton([...argv, '--json']);
      expect({ argv, code: typed.code, out: typed.out }).toEqual({ argv, code: 1, out: '' });
      expect(JSON.parse(typed.err)).toMatchObject({
        error: { code: 'bad_reply', details: { http_status: 200, content_type: 'text/html; charset=utf-8', url: expect.stringContaining(apiUrl) } },
      });
    }
  });

  it('a JSON 200 that is not the route’s reply ({"hello":1}) is bad_reply for each command, and for the stop read before an approve', async () => {
    answer = reply(200, 'application/json', '{"hello":1}');
    for (const argv of [...ACTIONS, ['answer', 'stop-1', '--project', 'p', '--action', 'approve']]) {
      const typed = await baton([...argv, '--json']);
      expect({ argv, code: typed.code, out: typed.out, error: (JSON.parse(typed.err) as { error: { code: string } }).error.code }).toEqual({
        argv,
        code: 1,
        out: '',
        error: 'bad_reply',
      });
      expect(typed.err).toContain('JSON that is not the reply of this route');
    }
  });

  it('an error status without the API’s error body keeps no made-up code: 404 "Cannot POST" and a plain-text 500 are bad_reply, 502/503/504 unavailable; http_status kept, stdout empty', async () => {
    const cases: [number, string, string, string][] = [
      [404, 'text/html; charset=utf-8', '<pre>Cannot POST /v1/projects/p/handoffs/ho-x/abandon</pre>', 'bad_reply'],
      [404, 'application/json', '{"statusCode":404,"message":"Cannot POST /v1/projects/p/handoffs/ho-x/abandon","error":"Not Found"}', 'bad_reply'],
      [500, 'text/plain', 'Internal Server Error', 'bad_reply'],
      [502, 'text/html', '<html>Bad Gateway</html>', 'unavailable'],
      [503, 'text/plain', 'Service Unavailable', 'unavailable'],
      [504, 'text/plain', '', 'unavailable'],
    ];
    for (const [status, contentType, body, code] of cases) {
      answer = reply(status, contentType, body);
      const typed = await baton(['abandon', 'ho-x', '--project', 'p', '--reason', 'x', '--json']);
      expect({ status, code: typed.code, out: typed.out }).toEqual({ status, code: code === 'unavailable' ? 69 : 1, out: '' });
      expect({ status, error: (JSON.parse(typed.err) as { error: unknown }).error }).toMatchObject({
        status,
        error: { code, details: { http_status: status, content_type: contentType } },
      });
    }
  });

  it('a refusal in the API’s error form keeps its code (and stays on stdout with --json)', async () => {
    const refusal = { error: { code: 'handoff_not_open', message: 'handoff ho-x is completed', issues: [], details: { status: 'completed' } } };
    answer = reply(409, 'application/json; charset=utf-8', JSON.stringify(refusal));
    const typed = await baton(['abandon', 'ho-x', '--project', 'p', '--reason', 'x', '--json']);
    expect(typed.code).toBe(1);
    expect(JSON.parse(typed.out)).toEqual(refusal);
    expect(JSON.parse(typed.err)).toMatchObject({ error: { code: 'handoff_not_open', details: { status: 'completed', http_status: 409 } } });
  });

  it('BATON_TOKEN unset: nothing is sent — each command says what was not sent (not "refused"), unauthenticated with details.reason missing, stdout empty with --json', async () => {
    // Whatever answered would refuse it: the CLI must not get that far.
    answer = reply(
      401,
      'application/json',
      JSON.stringify({ error: { code: 'unauthenticated', message: 'send Authorization: Bearer <token>', issues: [], details: { reason: 'missing' } } }),
    );
    received = 0;
    const cases: Array<[readonly string[], string]> = [
      [['answer-hold', 'wr-1', '--project', 'p', '--action', 'continue'], 'the answer was not sent'],
      [['answer', 'stop-1', '--project', 'p', '--action', 'deny'], 'the answer was not sent'],
      [['answer', 'stop-1', '--project', 'p', '--action', 'approve'], 'stop stop-1 was not read'],
      [['decide', 'hb-1', 'accept', '--project', 'p'], 'the decision was not sent'],
      [['abandon', 'ho-x', '--project', 'p', '--reason', 'x'], 'the abandon was not sent'],
      [['notice', 'redeliver', 'nt-1', '--project', 'p'], 'the redelivery of notice nt-1 was not asked for'],
    ];
    for (const [argv, unsent] of cases) {
      const prose = await baton([...argv], {});
      expect({ argv, code: prose.code, out: prose.out }).toEqual({ argv, code: 1, out: '' });
      expect(prose.err).toContain(`${unsent}: BATON_TOKEN is not set: the operator API at ${apiUrl} needs a token`);
      expect(prose.err).toContain('baton token create');
      expect(prose.err).not.toContain('refused');
      const typed = await baton([...argv, '--json'], {});
      expect({ argv, code: typed.code, out: typed.out }).toEqual({ argv, code: 1, out: '' });
      expect(JSON.parse(typed.err)).toEqual({
        error: {
          code: 'unauthenticated',
          message: expect.stringMatching(new RegExp(`^${unsent}: BATON_TOKEN is not set`)),
          issues: [],
          details: { reason: 'missing' },
        },
      });
    }
    expect(received).toBe(0);
  });

  it('a 401 to a token that was sent says it is unknown, expired or revoked, and to make a new one with baton token create', async () => {
    answer = reply(
      401,
      'application/json',
      JSON.stringify({ error: { code: 'unauthenticated', message: 'send Authorization: Bearer <token> (create one with `baton token create`)', issues: [] } }),
    );
    const refused = await baton(['answer', 'stop-1', '--project', 'p', '--action', 'deny']);
    expect(refused.code).toBe(1);
    expect(refused.err).toContain(
      `the answer was refused: unauthenticated: the operator API at ${apiUrl} refused BATON_TOKEN: it is unknown there, expired or revoked`,
    );
    expect(refused.err).toContain('baton token create');
    const typed = await baton(['abandon', 'ho-x', '--project', 'p', '--reason', 'x', '--json']);
    expect(JSON.parse(typed.err)).toMatchObject({ error: { code: 'unauthenticated', details: { http_status: 401 } } });
  });

  it('an abandon or decision sent again with the same key (the API stored no event: events 0) says it was already applied', async () => {
    let events = 1;
    answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ outcome: 'applied', handoff: { id: 'ho-x', project: 'p', status: 'abandoned' }, events }));
    };
    expect(await baton(['abandon', 'ho-x', '--project', 'p', '--reason', 'x', '--key', 'k-1'])).toMatchObject({
      code: 0,
      out: 'abandoned: ho-x (project p)\n',
    });
    events = 0;
    expect(await baton(['abandon', 'ho-x', '--project', 'p', '--reason', 'x', '--key', 'k-1'])).toMatchObject({
      code: 0,
      out: 'already abandoned: ho-x (project p): this key (k-1) was applied before; nothing new was done\n',
    });
    const typed = await baton(['abandon', 'ho-x', '--project', 'p', '--reason', 'x', '--key', 'k-1', '--json']);
    expect(JSON.parse(typed.out)).toMatchObject({ project: 'p', outcome: 'applied', events: 0 });
    expect(await baton(['decide', 'ho-x', 'accept', '--project', 'p', '--key', 'k-2'])).toMatchObject({
      code: 0,
      out: 'already accepted: ho-x (project p): this key (k-2) was applied before; nothing new was done\n',
    });
  });
});
