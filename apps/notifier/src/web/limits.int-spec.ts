import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import { AuthKeys } from '../auth/token-store';
import { startFixture, type NotifierFixture } from './console-fixture.int-support';

/*
 * Issue 14, "An API that fails fast and holds under load": the notifier's HTTP server closes
 * slow-loris and idle sockets after the headers timeout and refuses connections past its cap; live
 * streams are capped per token and in total (429 `too_many_streams`) and end when their token is
 * revoked or expires; tokens may expire, a token record outside the token set is refused, failed
 * authentications are rate-limited per client address (429 with Retry-After) and logged with it;
 * responses carry `nosniff` and no `X-Powered-By`. A notifier on real NATS and Redis, with small
 * limits so each one is reached quickly.
 */

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
let fx: NotifierFixture;
let port: number;

const LIMITS = {
  NOTIFIER_HTTP_HEADERS_TIMEOUT_MS: '1000',
  NOTIFIER_HTTP_REQUEST_TIMEOUT_MS: '2000',
  NOTIFIER_HTTP_KEEPALIVE_TIMEOUT_MS: '1000',
  NOTIFIER_HTTP_MAX_CONNECTIONS: '40',
  NOTIFIER_STREAMS_PER_TOKEN: '3',
  NOTIFIER_STREAMS_MAX: '5',
  NOTIFIER_STREAM_AUTH_CHECK_MS: '100',
  NOTIFIER_AUTH_FAILURES_PER_MINUTE: '3',
};

interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/** One HTTP request from a chosen loopback address (each test's failures count against its own address). */
function call(path: string, options: { method?: string; headers?: Record<string, string>; body?: string | Buffer; from?: string } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        path,
        method: options.method ?? 'GET',
        headers: { connection: 'close', ...(options.headers ?? {}) },
        localAddress: options.from ?? '127.0.0.1',
      },
      (res: IncomingMessage) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      },
    );
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error(`${path} timed out`)));
    req.end(options.body);
  });
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** A live stream opened with `token`: resolves once `event: ready` arrived (or with the refusal). */
interface LiveStream {
  status: number;
  text: () => string;
  ended: Promise<number>;
  close(): void;
}

function openStream(token: string, from = '127.0.0.1'): Promise<LiveStream> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const req = httpRequest({ host: '127.0.0.1', port, path: '/v1/events/stream', headers: bearer(token), localAddress: from }, (res) => {
      let text = '';
      let resolveEnded: (ms: number) => void = () => undefined;
      const ended = new Promise<number>((r) => (resolveEnded = r));
      res.setEncoding('utf8');
      res.on('end', () => resolveEnded(Date.now() - started));
      res.on('close', () => resolveEnded(Date.now() - started));
      const stream: LiveStream = { status: res.statusCode ?? 0, text: () => text, ended, close: () => req.destroy() };
      res.on('data', (chunk: string) => {
        text += chunk;
        if (text.includes('event: ready')) resolve(stream);
      });
      if (res.statusCode !== 200) res.on('end', () => resolve(stream));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A raw socket to the notifier, with the time it closed (if it did). */
function rawSocket(): Promise<{ socket: Socket; opened: number; closed: Promise<number>; received: () => string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (received += chunk));
    socket.on('error', () => undefined);
    socket.once('connect', () => {
      const opened = Date.now();
      const closed = new Promise<number>((r) => socket.once('close', () => r(Date.now() - opened)));
      resolve({ socket, opened, closed, received: () => received });
    });
    socket.once('error', reject);
  });
}

describe('an API that holds under load: connection and stream caps, token expiry and revocation, auth failure limits (real NATS, Redis and HTTP)', () => {
  beforeAll(async () => {
    fx = await startFixture(LIMITS);
    port = Number(new URL(fx.base).port);
  });

  afterAll(async () => {
    await fx?.close();
  });

  it('a socket that sends its headers byte by byte is closed after the headers timeout (408), and so is one that sends nothing', async () => {
    const slow = await rawSocket();
    const request = 'GET /v1/inbox HTTP/1.1\r\nHost: x\r\nX-Slow: ' + 'a'.repeat(200);
    let i = 0;
    const drip = setInterval(() => {
      if (!slow.socket.destroyed) slow.socket.write(request[i++ % request.length]!);
    }, 50);
    const idle = await rawSocket();
    try {
      const [slowMs, idleMs] = await Promise.all([slow.closed, idle.closed]);
      expect(slowMs).toBeGreaterThanOrEqual(900);
      expect(slowMs).toBeLessThan(3000);
      expect(slow.received()).toMatch(/^HTTP\/1\.1 408/);
      expect(idleMs).toBeGreaterThanOrEqual(900);
      expect(idleMs).toBeLessThan(3500);
    } finally {
      clearInterval(drip);
    }
    // A normal request is not affected.
    expect((await call('/health/live')).status).toBe(200);
  });

  it('past NOTIFIER_HTTP_MAX_CONNECTIONS a new connection is closed at once; once sockets close, requests are served again', async () => {
    const server = fx.service.app.getHttpServer() as { getConnections(cb: (error: Error | null, count: number) => void): void };
    const current = await new Promise<number>((resolve, reject) => server.getConnections((error, count) => (error ? reject(error) : resolve(count))));
    const held = await Promise.all(Array.from({ length: 40 - current }, () => rawSocket()));
    const extra = await rawSocket();
    expect(await Promise.race([extra.closed, sleep(800).then(() => -1)])).toBeGreaterThanOrEqual(0);
    expect(held.every((h) => !h.socket.destroyed)).toBe(true);
    for (const h of held) h.socket.destroy();
    await sleep(100);
    expect((await call('/health/live')).status).toBe(200);
  });

  it('the N+1th live stream on one token gets 429 too_many_streams; past the total cap any token does', async () => {
    const vera = await fx.token('vera', 'viewer', ['alpha']);
    const vic = await fx.token('vic', 'viewer', ['alpha']);
    const mine = [await openStream(vera), await openStream(vera), await openStream(vera)];
    expect(mine.map((s) => s.status)).toEqual([200, 200, 200]);
    const fourth = await openStream(vera);
    expect(fourth.status).toBe(429);
    expect(JSON.parse(fourth.text())).toMatchObject({ error: { code: 'too_many_streams', details: { scope: 'token', limit: 3 } } });
    // Two more by another token reach the total of 5; a sixth is refused whoever asks.
    const others = [await openStream(vic), await openStream(vic)];
    expect(others.map((s) => s.status)).toEqual([200, 200]);
    const sixth = await openStream(await fx.token('val', 'viewer', ['alpha']));
    expect(sixth.status).toBe(429);
    expect(JSON.parse(sixth.text())).toMatchObject({ error: { code: 'too_many_streams', details: { scope: 'total', limit: 5 } } });
    // Closing one frees its place.
    mine[0]!.close();
    await mine[0]!.ended;
    await sleep(100);
    const again = await openStream(vera);
    expect(again.status).toBe(200);
    for (const s of [...mine, again, ...others]) s.close();
    await sleep(100);
  });

  it('clients that hang up while their stream is being authenticated hold no place: the token can still open its full share', async () => {
    const hasty = await fx.token('hank', 'viewer', ['alpha']);
    // The hang-up follows the request by 0–7 ms: some land while the guard reads the token.
    for (let i = 0; i < 16; i++) {
      const { socket, closed } = await rawSocket();
      socket.write(`GET /v1/events/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${bearer(hasty).authorization}\r\n\r\n`);
      await sleep(i % 8);
      socket.destroy();
      await closed;
    }
    await sleep(200);
    const streams = [await openStream(hasty), await openStream(hasty), await openStream(hasty)];
    expect(streams.map((s) => s.status)).toEqual([200, 200, 200]);
    for (const s of streams) s.close();
    await sleep(100);
  });

  it("revoking a token ends its open live stream (event: closed); an expiring token's stream ends when it expires", async () => {
    const revoked = await fx.token('rita', 'viewer', ['alpha']);
    const stream = await openStream(revoked);
    expect(stream.status).toBe(200);
    const tokenId = /^bt_([0-9a-f]{16})_/.exec(revoked)![1]!;
    const revokedAt = Date.now();
    await fx.tokens.revoke(tokenId, new Date().toISOString());
    await stream.ended;
    expect(Date.now() - revokedAt).toBeLessThan(2000);
    expect(stream.text()).toContain('event: closed\ndata: {"reason":"token_invalid"}');
    expect((await call('/v1/inbox', { headers: bearer(revoked) })).status).toBe(401);

    const now = Date.now();
    const brief = (
      await fx.tokens.create({
        name: 'ezra',
        role: 'viewer',
        projects: ['alpha'],
        now: new Date(now).toISOString(),
        expiresAt: new Date(now + 1500).toISOString(),
      })
    ).token;
    expect((await call('/v1/inbox', { headers: bearer(brief) })).status).toBe(200);
    const expiring = await openStream(brief);
    expect(expiring.status).toBe(200);
    await expiring.ended;
    expect(Date.now() - now).toBeGreaterThanOrEqual(1400);
    expect(expiring.text()).toContain('"reason":"token_invalid"');
    expect((await call('/v1/inbox', { headers: bearer(brief) })).status).toBe(401);
  });

  it('tokens: an expired token is refused and listed with its expiry; a token record that is not in the token set is refused', async () => {
    const now = Date.now();
    const created = await fx.tokens.create({
      name: 'olive',
      role: 'operator',
      projects: ['alpha'],
      now: new Date(now).toISOString(),
      expiresAt: new Date(now + 30 * 86_400_000).toISOString(),
    });
    expect(created.info.expires_at).toBe(new Date(now + 30 * 86_400_000).toISOString());
    expect((await fx.tokens.list()).find((t) => t.token_id === created.info.token_id)).toMatchObject({ expires_at: created.info.expires_at });
    expect((await call('/v1/inbox', { headers: bearer(created.token) })).status).toBe(200);
    await expect(
      fx.tokens.create({ name: 'late', role: 'viewer', projects: ['alpha'], now: new Date(now).toISOString(), expiresAt: new Date(now - 1000).toISOString() }),
    ).rejects.toThrow(/expires_at/);

    // A valid-looking record written straight to Redis, outside the token set: refused.
    const planted = await fx.tokens.create({ name: 'mallory', role: 'admin', projects: '*', now: new Date().toISOString() });
    expect((await call('/v1/inbox', { headers: bearer(planted.token) })).status).toBe(200);
    await fx.redis.client.srem(AuthKeys.tokens(fx.prefix), planted.info.token_id);
    expect((await call('/v1/inbox', { headers: bearer(planted.token) })).status).toBe(401);
    expect(await fx.tokens.check(planted.token)).toEqual({ ok: false, reason: 'not_in_token_set', tokenId: planted.info.token_id });
  });

  it('failed API authentications are limited per client address: 429 too_many_auth_failures with Retry-After (even for a valid token), logged with the address; other addresses are unaffected', async () => {
    const good = await fx.token('gina', 'viewer', ['alpha']);
    const warn = jest.spyOn(fx.service.runtime.logger, 'warn');
    try {
      const bad = 'bt_0123456789abcdef_' + 'A'.repeat(43);
      for (let i = 0; i < 2; i++) expect((await call('/v1/inbox', { headers: bearer(bad), from: '127.0.0.2' })).status).toBe(401);
      // No credentials at all is not a failed guess: it does not count.
      expect((await call('/v1/inbox', { from: '127.0.0.2' })).status).toBe(401);
      expect((await call('/v1/inbox', { headers: bearer(bad), from: '127.0.0.2' })).status).toBe(401);
      const limited = await call('/v1/inbox', { headers: bearer(bad), from: '127.0.0.2' });
      expect(limited.status).toBe(429);
      expect(JSON.parse(limited.text)).toMatchObject({ error: { code: 'too_many_auth_failures' } });
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
      expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
      expect((await call('/v1/inbox', { headers: bearer(good), from: '127.0.0.2' })).status).toBe(429);
      expect((await call('/v1/inbox', { headers: bearer(good), from: '127.0.0.3' })).status).toBe(200);
      const logged = warn.mock.calls.filter(([message]) => message === 'api authentication failed');
      expect(logged).toHaveLength(3);
      expect(logged[0]![1]).toMatchObject({ address: '127.0.0.2', reason: 'unknown' });
    } finally {
      warn.mockRestore();
    }
  });

  it('failed sign-ins are limited per client address too, and logged with it', async () => {
    const warn = jest.spyOn(fx.service.runtime.logger, 'warn');
    try {
      const signIn = async (token: string) => {
        const page = await call('/login', { from: '127.0.0.4' });
        const csrf = /name="_csrf" value="([^"]+)"/.exec(page.text)![1]!;
        const cookie = String(page.headers['set-cookie']![0]).split(';')[0]!;
        return call('/login', {
          method: 'POST',
          from: '127.0.0.4',
          headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ _csrf: csrf, token, next: '/inbox' }).toString(),
        });
      };
      for (let i = 0; i < 3; i++) expect((await signIn('not-a-token')).status).toBe(401);
      const limited = await signIn(await fx.token('gail', 'viewer', ['alpha']));
      expect(limited.status).toBe(429);
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
      expect(warn.mock.calls.filter(([message]) => message === 'web sign-in refused').map(([, fields]) => fields)).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ reason: 'malformed', address: '127.0.0.4' }),
          expect.objectContaining({ reason: 'too_many_auth_failures', address: '127.0.0.4' }),
        ]),
      );
    } finally {
      warn.mockRestore();
    }
  });

  it('X-Forwarded-For is ignored by default: a client cannot escape the failure limit by naming another address', async () => {
    const bad = 'bt_0123456789abcdef_' + 'B'.repeat(43);
    for (let i = 0; i < 3; i++) {
      const headers = { ...bearer(bad), 'x-forwarded-for': `198.51.100.${i}` };
      expect((await call('/v1/inbox', { headers, from: '127.0.0.6' })).status).toBe(401);
    }
    const limited = await call('/v1/inbox', { headers: { ...bearer(bad), 'x-forwarded-for': '198.51.100.99' }, from: '127.0.0.6' });
    expect(limited.status).toBe(429);
  });

  it('a request Node refuses before routing is answered like every API refusal: 431 headers_too_large, 400 malformed_request (JSON, nosniff), then the connection closes', async () => {
    const big = await call('/v1/inbox', { headers: { 'x-filler': 'a'.repeat(20_000) }, from: '127.0.0.7' });
    expect({ status: big.status, type: big.headers['content-type'], nosniff: big.headers['x-content-type-options'], body: JSON.parse(big.text) }).toEqual({
      status: 431,
      type: 'application/json; charset=utf-8',
      nosniff: 'nosniff',
      body: { error: { code: 'headers_too_large', message: expect.stringContaining('16 KiB'), issues: [] } },
    });
    const raw = await rawSocket();
    raw.socket.write('GET /v1/inbox HTTP/1.1\r\nHost x\r\n\r\n');
    await raw.closed;
    const [head, body] = raw.received().split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(head).toMatch(/\r\nConnection: close(\r\n|$)/);
    expect(JSON.parse(body!)).toEqual({ error: { code: 'malformed_request', message: 'the request is not valid HTTP/1.1', issues: [] } });
    expect((await call('/health/live')).status).toBe(200);
  });

  it('a body of a type the notifier does not read (text/plain, no Content-Type) is 415 unsupported_media_type, not a 400 listing every field as missing', async () => {
    const olga = await fx.token('olga', 'operator', ['alpha']);
    const answer = JSON.stringify({ action: 'deny', answer_id: 'a-1' });
    const plain = await call('/v1/projects/alpha/stops/pk-1/answer', {
      method: 'POST',
      headers: { ...bearer(olga), 'content-type': 'text/plain' },
      body: answer,
      from: '127.0.0.8',
    });
    expect({ status: plain.status, body: JSON.parse(plain.text) }).toEqual({
      status: 415,
      body: {
        error: {
          code: 'unsupported_media_type',
          message: expect.stringContaining('"text/plain"'),
          issues: [],
          details: { accepted: ['application/json', 'application/x-www-form-urlencoded'] },
        },
      },
    });
    const untyped = await call('/v1/projects/alpha/stops/pk-1/answer', { method: 'POST', headers: bearer(olga), body: answer, from: '127.0.0.8' });
    expect({ status: untyped.status, code: JSON.parse(untyped.text).error.code }).toEqual({ status: 415, code: 'unsupported_media_type' });
    // JSON goes on to the route (the packet does not exist); a request without a body is not checked.
    const json = await call('/v1/projects/alpha/stops/pk-1/answer', {
      method: 'POST',
      headers: { ...bearer(olga), 'content-type': 'application/json' },
      body: answer,
      from: '127.0.0.8',
    });
    expect(json.status).toBe(404);
    const empty = await call('/v1/projects/alpha/stops/pk-1/answer', {
      method: 'POST',
      headers: { ...bearer(olga), 'content-length': '0' },
      from: '127.0.0.8',
    });
    expect({ status: empty.status, code: JSON.parse(empty.text).error.code }).toEqual({ status: 400, code: 'schema_violation' });
  });

  it('an unauthenticated request is 401 whatever its body: a body the API cannot read (malformed JSON, a type it does not read, not UTF-8, too large) is refused only once the caller is known', async () => {
    const path = '/v1/projects/alpha/stops/pk-1/answer';
    const bodies: Array<{ what: string; headers: Record<string, string>; body: string | Buffer; code: string; status: number }> = [
      { what: 'malformed JSON', headers: { 'content-type': 'application/json' }, body: '{"action":', code: 'malformed_json', status: 400 },
      { what: 'text/plain', headers: { 'content-type': 'text/plain' }, body: 'deny', code: 'unsupported_media_type', status: 415 },
      {
        what: 'not UTF-8',
        headers: { 'content-type': 'application/json' },
        body: Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x7d]),
        code: 'invalid_utf8',
        status: 400,
      },
      {
        what: 'over the limit',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ pad: 'x'.repeat(200 * 1024) }),
        code: 'payload_too_large',
        status: 413,
      },
    ];
    const olga = await fx.token('olga', 'operator', ['alpha']);
    for (const { what, headers, body, code, status } of bodies) {
      const anonymous = await call(path, { method: 'POST', headers, body, from: '127.0.0.9' });
      expect({ what, status: anonymous.status, code: JSON.parse(anonymous.text).error.code }).toEqual({ what, status: 401, code: 'unauthenticated' });
      expect(anonymous.headers['www-authenticate']).toBe('Bearer realm="baton"');
      // Signed in, the same body gets its own refusal, as before.
      const signed = await call(path, { method: 'POST', headers: { ...headers, ...bearer(olga) }, body, from: '127.0.0.9' });
      expect({ what, status: signed.status, code: JSON.parse(signed.text).error.code }).toEqual({ what, status, code });
      expect(signed.headers['cache-control']).toBe('private, no-cache');
    }
    // Outside the API (the sign-in form) a body the server cannot read is refused as it comes.
    const login = await call('/login', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x', from: '127.0.0.9' });
    expect(login.status).toBe(415);
  });

  it('a cursor is bound to its listing: an inbox cursor given to /v1/stops is 400, not a page from a position that means nothing there', async () => {
    const viv = await fx.token('viv', 'viewer', ['alpha']);
    const made = Buffer.from(JSON.stringify({ v: 1, o: 'newest', s: 'inbox', k: `${'0'.repeat(16)}:x` }), 'utf8').toString('base64url');
    const reply = await call(`/v1/stops?cursor=${made}`, { headers: bearer(viv), from: '127.0.0.8' });
    expect({ status: reply.status, body: JSON.parse(reply.text) }).toEqual({
      status: 400,
      body: {
        error: {
          code: 'schema_violation',
          message: expect.stringContaining('inbox listing, not stops'),
          issues: [{ path: 'cursor', message: expect.any(String) }],
        },
      },
    });
    expect((await call(`/v1/inbox?cursor=${made}`, { headers: bearer(viv), from: '127.0.0.8' })).status).toBe(200);
    // A cursor the API returned is bound to the filters it was returned for (the token's project scope among them).
    const bound = Buffer.from(JSON.stringify({ v: 1, o: 'newest', s: 'inbox', k: `${'0'.repeat(16)}:x`, f: { status: 'made-for' } }), 'utf8').toString(
      'base64url',
    );
    const other = await call(`/v1/inbox?status=open&cursor=${bound}`, { headers: bearer(viv), from: '127.0.0.8' });
    expect({ status: other.status, code: JSON.parse(other.text).error.code, message: JSON.parse(other.text).error.message }).toEqual({
      status: 400,
      code: 'schema_violation',
      message: expect.stringMatching(/other filters \(.*`status`\)/),
    });
  });

  it("/v1 answers are private to who asked (Cache-Control: private, no-cache; Vary: Authorization, Cookie), so no shared cache serves one token's answer to another; a conditional GET of an unchanged answer is 304", async () => {
    const token = await fx.token('ivy', 'viewer', ['alpha']);
    const privateHeaders = (reply: Reply) => ({ cache: reply.headers['cache-control'], vary: reply.headers['vary'] });
    const first = await call('/v1/inbox', { headers: bearer(token), from: '127.0.0.9' });
    expect(first.status).toBe(200);
    expect(privateHeaders(first)).toEqual({ cache: 'private, no-cache', vary: 'Authorization, Cookie' });
    // Refusals too (an unauthenticated request, an unknown /v1 path).
    for (const [path, headers] of [
      ['/v1/inbox', {}],
      ['/v1/nothing-here', bearer(token)],
    ] as const) {
      const reply = await call(path, { headers: { ...headers }, from: '127.0.0.9' });
      expect({ path, status: reply.status >= 400, ...privateHeaders(reply) }).toEqual({
        path,
        status: true,
        cache: 'private, no-cache',
        vary: 'Authorization, Cookie',
      });
    }
    const etag = first.headers['etag'];
    expect(etag).toEqual(expect.any(String));
    const again = await call('/v1/inbox', { headers: { ...bearer(token), 'if-none-match': etag! }, from: '127.0.0.9' });
    expect({ status: again.status, text: again.text, ...privateHeaders(again) }).toEqual({
      status: 304,
      text: '',
      cache: 'private, no-cache',
      vary: 'Authorization, Cookie',
    });
    // Node's fetch sends Cache-Control and Pragma no-cache with every conditional request: still 304.
    const fetched = await call('/v1/inbox', {
      headers: { ...bearer(token), 'if-none-match': etag!, 'cache-control': 'no-cache', pragma: 'no-cache' },
      from: '127.0.0.9',
    });
    expect(fetched.status).toBe(304);
    // Outside the API too: the document lists the 304 on every GET, and these answer it.
    for (const path of ['/openapi.json', '/docs', '/health/live']) {
      const plain = await call(path, { from: '127.0.0.9' });
      const tag = plain.headers['etag'];
      expect({ path, tag: typeof tag }).toEqual({ path, tag: 'string' });
      const unchanged = await call(path, { headers: { 'if-none-match': tag! }, from: '127.0.0.9' });
      expect({ path, status: unchanged.status }).toEqual({ path, status: 304 });
    }
    // A refusal of the body reader, which runs before any route, is private too.
    const json = { ...bearer(token), 'content-type': 'application/json' };
    for (const [headers, body, status] of [
      [{ ...bearer(token), 'content-type': 'text/plain' }, 'x', 415],
      [json, '{', 400],
      [{ ...json, 'content-type': 'application/json; charset=latin1' }, '{}', 415],
    ] as const) {
      const refused = await call('/v1/projects/alpha/runs/x/answer', { method: 'POST', headers: { ...headers }, body, from: '127.0.0.9' });
      expect({ status: refused.status, ...privateHeaders(refused) }).toEqual({ status, cache: 'private, no-cache', vary: 'Authorization, Cookie' });
    }
    // Pages keep their own no-store; the public OpenAPI document is not marked private.
    expect((await call('/login', { from: '127.0.0.9' })).headers['cache-control']).toBe('no-store');
    const openapi = await call('/openapi.json', { from: '127.0.0.9' });
    expect(openapi.headers['cache-control']).not.toBe('private, no-cache');
    // The document says so: a GET may answer 304 with those headers.
    const responses = (JSON.parse(openapi.text) as { paths: Record<string, { get: { responses: Record<string, { headers?: object }> } }> }).paths['/v1/inbox']!
      .get.responses;
    expect(Object.keys(responses['304']?.headers ?? {})).toEqual(['ETag', 'Cache-Control', 'Vary']);
  });

  it('a route asked with a method it does not take is 405 method_not_allowed with an Allow header naming the ones it does; a path that is no route is 404 route_not_found', async () => {
    const token = await fx.token('jay', 'operator', ['alpha']);
    const refusal = async (path: string, method: string) => {
      const reply = await call(path, { method, headers: bearer(token), from: '127.0.0.10' });
      const body = reply.text === '' ? null : (JSON.parse(reply.text) as { error?: { code: string; details?: { allowed?: string[] } } });
      return { status: reply.status, allow: reply.headers['allow'], code: body?.error?.code, allowed: body?.error?.details?.allowed };
    };
    expect(await refusal('/v1/inbox', 'DELETE')).toEqual({ status: 405, allow: 'GET, HEAD', code: 'method_not_allowed', allowed: ['GET', 'HEAD'] });
    expect(await refusal('/v1/inbox', 'POST')).toMatchObject({ status: 405, allow: 'GET, HEAD' });
    expect(await refusal('/v1/projects/alpha/runs/wr-1/answer', 'GET')).toEqual({ status: 405, allow: 'POST', code: 'method_not_allowed', allowed: ['POST'] });
    expect(await refusal('/v1/projects/alpha/stops/p-1', 'PUT')).toMatchObject({ status: 405, allow: 'GET, HEAD' });
    // No route at all, under any method: 404.
    expect(await refusal('/v1/nothing-here', 'DELETE')).toMatchObject({ status: 404, allow: undefined, code: 'route_not_found' });
    expect(await refusal('/v1/nothing-here', 'GET')).toMatchObject({ status: 404, code: 'route_not_found' });
    // The methods a route takes still answer as before.
    expect((await refusal('/v1/inbox', 'GET')).status).toBe(200);
    // The request metrics name the route a 405 matched (only a path that is no route is `unmatched`).
    const metrics = (await call('/metrics', { from: '127.0.0.10' })).text;
    expect(metrics).toMatch(/baton_http_request_duration_seconds_count\{[^}]*method="DELETE",route="\/v1\/inbox",status_code="405"/);
    expect(metrics).toMatch(/baton_http_request_duration_seconds_count\{[^}]*method="DELETE",route="unmatched",status_code="404"/);
  });

  it('responses send X-Content-Type-Options: nosniff and no X-Powered-By (JSON, errors, pages, health)', async () => {
    const token = await fx.token('hal', 'viewer', ['alpha']);
    for (const [path, headers] of [
      ['/v1/inbox', bearer(token)],
      ['/v1/inbox', {}],
      ['/v1/nothing-here', bearer(token)],
      ['/openapi.json', {}],
      ['/login', {}],
      ['/health/ready', {}],
    ] as const) {
      const reply = await call(path, { headers: { ...headers }, from: '127.0.0.5' });
      expect({ path, nosniff: reply.headers['x-content-type-options'], poweredBy: reply.headers['x-powered-by'] }).toEqual({
        path,
        nosniff: 'nosniff',
        poweredBy: undefined,
      });
    }
    // Refusals of the body reader, which runs before any route or Nest middleware, and of a path it cannot decode.
    const json = { ...bearer(token), 'content-type': 'application/json' };
    for (const [path, options, status] of [
      ['/v1/projects/alpha/runs/x/answer', { method: 'POST', headers: json, body: '{"a' }, 400],
      ['/v1/projects/alpha/runs/x/answer', { method: 'POST', headers: json, body: `"${'x'.repeat(300_000)}"` }, 413],
      ['/v1/projects/alpha/runs/x/answer', { method: 'POST', headers: { ...json, 'content-type': 'application/json; charset=latin1' }, body: '{}' }, 415],
      ['/v1/projects/alpha/runs/%E0%A4%A', {}, 400],
    ] as const) {
      const reply = await call(path, { ...options, headers: { ...options.headers }, from: '127.0.0.5' });
      expect({ path, status: reply.status, nosniff: reply.headers['x-content-type-options'], poweredBy: reply.headers['x-powered-by'] }).toEqual({
        path,
        status,
        nosniff: 'nosniff',
        poweredBy: undefined,
      });
    }
  });
});

describe('behind a proxy (NOTIFIER_TRUST_PROXY=loopback): the failure limit counts the address the proxy names', () => {
  let proxied: NotifierFixture;
  beforeAll(async () => {
    proxied = await startFixture({ NOTIFIER_AUTH_FAILURES_PER_MINUTE: '2', NOTIFIER_TRUST_PROXY: 'loopback' });
    port = Number(new URL(proxied.base).port);
  });
  afterAll(async () => {
    await proxied?.close();
  });

  it("one client's failed tokens lock out that client, not every client behind the same proxy; the log names the forwarded address", async () => {
    const good = await proxied.token('gus', 'viewer', ['alpha']);
    const bad = 'bt_0123456789abcdef_' + 'C'.repeat(43);
    const via = (client: string, token: string) => call('/v1/inbox', { headers: { ...bearer(token), 'x-forwarded-for': client } });
    const warn = jest.spyOn(proxied.service.runtime.logger, 'warn');
    try {
      expect([(await via('203.0.113.1', bad)).status, (await via('203.0.113.1', bad)).status]).toEqual([401, 401]);
      expect((await via('203.0.113.1', good)).status).toBe(429);
      expect((await via('203.0.113.2', good)).status).toBe(200);
      // The client is the address the trusted proxy appended last: one a client wrote itself, further left, is not believed.
      expect((await via('203.0.113.9, 203.0.113.1', good)).status).toBe(429);
      expect(warn.mock.calls.filter(([message]) => message === 'api authentication failed').map(([, fields]) => fields)).toEqual([
        expect.objectContaining({ address: '203.0.113.1' }),
        expect.objectContaining({ address: '203.0.113.1' }),
      ]);
    } finally {
      warn.mockRestore();
    }
  });
});
