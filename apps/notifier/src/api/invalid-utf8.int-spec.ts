import { startFixture, type NotifierFixture } from '../web/console-fixture.int-support';

/**
 * The operator API's body parser (issue 14): a JSON body whose bytes are not UTF-8 is refused 400
 * `invalid_utf8` before anything reads it — Express used to decode it with U+FFFD in place of each
 * bad byte, so a bad byte inside a string reached the handler as text the client never sent.
 */
let fx: NotifierFixture;
let token: string;

beforeAll(async () => {
  fx = await startFixture();
  token = await fx.token('olga', 'operator', ['shop']);
}, 30_000);

afterAll(async () => {
  await fx?.close();
});

async function post(path: string, body: Uint8Array | string, contentType = 'application/json') {
  const response = await fetch(`${fx.base}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': contentType },
    body: typeof body === 'string' ? body : Buffer.from(body),
  });
  return { status: response.status, json: (await response.json()) as { error?: { code: string; message: string } } };
}

const encoder = new TextEncoder();
const withByte = (before: string, bad: number[], after: string) => new Uint8Array([...encoder.encode(before), ...bad, ...encoder.encode(after)]);

describe('operator API: a body that is not UTF-8 is refused invalid_utf8', () => {
  it('a byte that is not UTF-8 inside a JSON string (valid JSON once replaced) → 400 invalid_utf8 naming the offset; a cut sequence likewise', async () => {
    const answer = withByte('{"action":"deny","answer_id":"a-1","note":"', [0xff], '"}');
    const refused = await post('/v1/projects/shop/stops/pk-1/answer', answer);
    expect(refused).toEqual({ status: 400, json: { error: expect.objectContaining({ code: 'invalid_utf8', message: expect.stringContaining('offset 43') }) } });
    const cut = withByte('{"action":"continue","answer_id":"a-2","note":"caf', [0xc3], '"}');
    expect((await post('/v1/projects/shop/runs/r-1/answer', cut)).json.error?.code).toBe('invalid_utf8');
  });

  it('UTF-8 that is not JSON is still malformed_json, and a UTF-8 body goes on to the route (here: 404, the packet does not exist)', async () => {
    expect((await post('/v1/projects/shop/stops/pk-1/answer', '{"action":')).json.error?.code).toBe('malformed_json');
    const ok = await post('/v1/projects/shop/stops/pk-1/answer', JSON.stringify({ action: 'deny', answer_id: 'a-3', note: 'café' }));
    expect(ok.status).toBe(404);
  });

  it('a JSON body declared in a charset other than UTF is refused 415 unsupported_charset (it was a 500)', async () => {
    const latin1 = withByte('{"action":"deny","answer_id":"a-4","note":"caf', [0xe9], '"}');
    const reply = await post('/v1/projects/shop/stops/pk-1/answer', latin1, 'application/json; charset=latin1');
    expect(reply).toEqual({ status: 415, json: { error: expect.objectContaining({ code: 'unsupported_charset' }) } });
  });
});

describe('web forms: a form body that is not UTF-8 is refused too', () => {
  it('the sign-in form with a byte that is not UTF-8 → 400 invalid_utf8, not a sign-in with a replaced token', async () => {
    const body = withByte('token=', [0xff, 0xfe], '&next=%2Finbox');
    const response = await fetch(`${fx.base}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: Buffer.from(body),
      redirect: 'manual',
    });
    expect(response.status).toBe(400);
    expect(await response.text()).toContain('invalid_utf8');
  });
});
