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

  it('a JSON body declared in a charset other than UTF-8 is refused 415 unsupported_charset (it was a 500; UTF-16 and UTF-32 were decoded)', async () => {
    const latin1 = withByte('{"action":"deny","answer_id":"a-4","note":"caf', [0xe9], '"}');
    const reply = await post('/v1/projects/shop/stops/pk-1/answer', latin1, 'application/json; charset=latin1');
    expect(reply).toEqual({ status: 415, json: { error: expect.objectContaining({ code: 'unsupported_charset' }) } });
    const utf16 = Buffer.from(JSON.stringify({ action: 'deny', answer_id: 'a-5' }), 'utf16le');
    for (const charset of ['utf-16le', 'utf-32', 'UTF-16']) {
      const refused = await post('/v1/projects/shop/stops/pk-1/answer', new Uint8Array(utf16), `application/json; charset=${charset}`);
      expect({ charset, ...refused }).toEqual({ charset, status: 415, json: { error: expect.objectContaining({ code: 'unsupported_charset' }) } });
    }
    expect(
      (await post('/v1/projects/shop/stops/pk-1/answer', JSON.stringify({ action: 'deny', answer_id: 'a-6' }), 'application/json; charset=UTF-8')).status,
    ).toBe(404);
  });

  it('JSON that is not an object (null, a string, a number) is JSON: refused by the schema (400 schema_violation), not malformed_json', async () => {
    for (const body of ['null', '"x"', '1', 'true']) {
      const reply = await post('/v1/projects/shop/stops/pk-1/answer', body);
      expect({ body, status: reply.status, code: reply.json.error?.code }).toEqual({ body, status: 400, code: 'schema_violation' });
    }
  });
});

describe('operator API: every body the reader cannot read is a typed client error, never a 500', () => {
  const send = async (path: string, body: Uint8Array | string, headers: Record<string, string>) => {
    const response = await fetch(`${fx.base}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : Buffer.from(body),
    });
    return { status: response.status, code: ((await response.json()) as { error?: { code: string } }).error?.code };
  };
  it('a gzip body that does not inflate → 400 malformed_body; a Content-Encoding the reader lacks → 415 unsupported_encoding', async () => {
    expect(await send('/v1/projects/shop/stops/pk-1/answer', new Uint8Array([0x1f, 0x8b, 0x08, 0x00, 0x01, 0x02]), { 'content-encoding': 'gzip' })).toEqual({
      status: 400,
      code: 'malformed_body',
    });
    expect(await send('/v1/projects/shop/stops/pk-1/answer', '{"action":"deny"}', { 'content-encoding': 'compress' })).toEqual({
      status: 415,
      code: 'unsupported_encoding',
    });
  });
  it('a form with more fields than the reader takes → 413 payload_too_large; nested past its depth → 400 malformed_body', async () => {
    const many = Array.from({ length: 1_100 }, (_, i) => `f${i}=1`).join('&');
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    expect(await send('/v1/projects/shop/stops/pk-1/answer', many, form)).toEqual({ status: 413, code: 'payload_too_large' });
    const deep = `a${'[b]'.repeat(40)}=1`;
    expect(await send('/v1/projects/shop/stops/pk-1/answer', deep, form)).toEqual({ status: 400, code: 'malformed_body' });
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
