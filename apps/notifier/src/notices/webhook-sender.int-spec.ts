import { randomBytes } from 'node:crypto';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer, type Socket } from 'node:net';
import { HumanActionNoticeSchema, type HumanActionNotice } from '@baton/contracts';
import { createRedis, projectRef, type RedisHandle } from '@baton/projections';
import { failureOf, targetId, WebhookSender, type DeliveryFailure } from './webhook-sender';

/*
 * Why a webhook call failed, as a stable reason code with the text of what happened — not Node's
 * `TypeError: fetch failed` for every network failure. Real receivers on loopback ports (one
 * refusing connections, one resetting them, one closing them, one answering 503, one never
 * answering, one speaking plain HTTP to an https URL) and a name that does not resolve; delivery
 * marks in the real Redis.
 */

const secret = 'reasons-secret-0123456789';

const listening = async <S extends HttpServer | TcpServer>(server: S): Promise<S> => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
};
const portOf = (server: HttpServer | TcpServer) => (server.address() as AddressInfo).port;
const closed = (server: HttpServer | TcpServer) => new Promise((resolve) => server.close(resolve));

describe('webhook failures: a reason code for each cause, with the text of what happened (loopback receivers, real Redis)', () => {
  let redis: RedisHandle;
  const prefix = `tr${randomBytes(5).toString('hex')}`;
  const servers: Array<HttpServer | TcpServer> = [];
  const sockets = new Set<Socket>();
  const urls: Record<string, string> = {};
  let notice: HumanActionNotice;

  /** A TCP server that does `onData` to each connection once the request arrives. */
  const tcp = async (onData: (socket: Socket) => void) => {
    const server = createTcpServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.once('data', () => onData(socket));
    });
    servers.push(server);
    return listening(server);
  };

  beforeAll(async () => {
    redis = createRedis();
    // A port nothing listens on: bound, then closed.
    const gone = await listening(createTcpServer());
    urls['refused'] = `http://127.0.0.1:${portOf(gone)}/hook`;
    await closed(gone);
    urls['reset'] = `http://127.0.0.1:${portOf(await tcp((socket) => socket.resetAndDestroy()))}/hook`;
    urls['closed'] = `http://127.0.0.1:${portOf(await tcp((socket) => socket.destroy()))}/hook`;
    urls['silent'] = `http://127.0.0.1:${portOf(await tcp(() => undefined))}/hook`;
    const http = await listening(
      createHttpServer((req, res) => {
        req.resume();
        req.on('end', () => {
          if (req.url === '/busy') res.writeHead(503).end('try later');
          else if (req.url === '/moved') res.writeHead(302, { location: '/ok' }).end();
          else res.writeHead(200).end();
        });
      }),
    );
    servers.push(http);
    urls['busy'] = `http://127.0.0.1:${portOf(http)}/busy`;
    urls['moved'] = `http://127.0.0.1:${portOf(http)}/moved`;
    urls['ok'] = `http://127.0.0.1:${portOf(http)}/ok`;
    // TLS to a server that speaks plain HTTP: the handshake fails.
    urls['tls'] = `https://127.0.0.1:${portOf(http)}/hook`;
    // `.invalid` never resolves (RFC 2606).
    urls['dns'] = `http://baton-webhook-${randomBytes(3).toString('hex')}.invalid/hook`;
    notice = HumanActionNoticeSchema.parse({
      notice_id: `nt-reasons-${randomBytes(3).toString('hex')}`,
      project: 'shop',
      workflow_run_id: 'wr-reasons',
      reason: 'hold',
      recipient: { handle: 'olga', source: 'started_by' },
      headline: 'needs a person',
      step: null,
      agent: null,
      created_at: new Date().toISOString(),
    });
  });

  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    for (const server of servers) {
      if ('closeAllConnections' in server) server.closeAllConnections();
      await closed(server);
    }
    for await (const batch of redis.client.scanStream({ match: `${prefix}:*`, count: 500 })) {
      const keys = batch as string[];
      if (keys.length > 0) await redis.client.unlink(...keys);
    }
    await redis.close();
  });

  it('refused, reset, closed, 503, a redirect, no answer in time, a failed TLS handshake and a name that does not resolve: each its reason, never "fetch failed"', async () => {
    const sender = new WebhookSender({
      targets: Object.values(urls).map((url) => ({ url, secret })),
      redis: redis.client,
      prefix,
      timeoutMs: 500,
    });
    const report = await sender.deliver(notice, 1);
    const by = (name: string): DeliveryFailure | undefined => report.failed.find((f) => f.target === targetId({ url: urls[name]! }));
    expect(report.delivered).toEqual([targetId({ url: urls['ok']! })]);
    expect(report.failed).toHaveLength(Object.keys(urls).length - 1);

    expect(by('refused')).toEqual({ target: expect.any(String), reason: 'connection_refused', error: expect.stringContaining('ECONNREFUSED') });
    expect(by('refused')!.error).toContain(`127.0.0.1:${new URL(urls['refused']!).port}`);
    expect(by('reset')).toMatchObject({ reason: 'connection_reset', error: expect.stringContaining('ECONNRESET') });
    // Closed by the receiver before it answered (undici: UND_ERR_SOCKET, "other side closed").
    expect(by('closed')).toMatchObject({ reason: 'connection_reset', error: expect.stringMatching(/UND_ERR_SOCKET|other side closed/) });
    expect(by('busy')).toEqual({ target: expect.any(String), reason: 'http_status', error: 'HTTP 503', status: 503 });
    expect(by('moved')).toMatchObject({ reason: 'http_status', status: 302 });
    expect(by('silent')).toMatchObject({ reason: 'timeout', error: 'no answer within 500 ms (NOTIFIER_WEBHOOK_TIMEOUT_MS)' });
    expect(by('tls')).toMatchObject({ reason: 'tls_failed', error: expect.stringMatching(/SSL|TLS|EPROTO/) });
    expect(by('dns')).toMatchObject({ reason: 'dns_failed', error: expect.stringMatching(/ENOTFOUND|EAI_AGAIN/) });
    // Not one says only what fetch says of them all.
    for (const failure of report.failed) expect(failure.error).not.toMatch(/^(TypeError: )?fetch failed$/);
  }, 20_000);

  it("one sender per notice and webhook: while another holds the webhook's lease (`…:sending`) the webhook is busy and not called, and the holder's lease is left; released, the notice goes", async () => {
    const own = { ...notice, notice_id: `nt-lease-${randomBytes(3).toString('hex')}` };
    const target = { url: urls['ok']!, secret };
    const sender = new WebhookSender({ targets: [target], redis: redis.client, prefix, timeoutMs: 500 });
    const lease = `${prefix}:webhooks:delivered:${targetId(target)}:${projectRef(own.project, own.notice_id)}:sending`;
    await redis.client.set(lease, 'another-sender', 'PX', 10_000);
    expect(await sender.deliver(own, 1)).toEqual({ delivered: [], skipped: [], busy: [targetId(target)], failed: [] });
    expect(await redis.client.get(lease)).toBe('another-sender');
    await redis.client.del(lease);
    expect(await sender.deliver(own, 2)).toEqual({ delivered: [targetId(target)], skipped: [], busy: [], failed: [] });
    expect(await redis.client.exists(lease)).toBe(0);
    expect(await sender.deliver(own, 3)).toEqual({ delivered: [], skipped: [targetId(target)], busy: [], failed: [] });
  });

  it('the certificate codes and the undici codes a live test cannot provoke here read as their reason; an error without a code keeps its whole chain as text', () => {
    const fetchFailed = (code: string, message: string) => new TypeError('fetch failed', { cause: Object.assign(new Error(message), { code }) });
    expect(failureOf(fetchFailed('DEPTH_ZERO_SELF_SIGNED_CERT', 'self-signed certificate'), 5000)).toEqual({
      reason: 'tls_failed',
      error: 'DEPTH_ZERO_SELF_SIGNED_CERT: self-signed certificate',
    });
    expect(failureOf(fetchFailed('ERR_TLS_CERT_ALTNAME_INVALID', "Hostname/IP does not match certificate's altnames"), 5000).reason).toBe('tls_failed');
    expect(failureOf(fetchFailed('CERT_HAS_EXPIRED', 'certificate has expired'), 5000).reason).toBe('tls_failed');
    expect(failureOf(fetchFailed('UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'unable to get local issuer certificate'), 5000).reason).toBe('tls_failed');
    expect(failureOf(fetchFailed('UND_ERR_CONNECT_TIMEOUT', 'Connect Timeout Error'), 5000)).toEqual({
      reason: 'timeout',
      error: 'UND_ERR_CONNECT_TIMEOUT: Connect Timeout Error',
    });
    expect(failureOf(fetchFailed('EHOSTUNREACH', 'connect EHOSTUNREACH 10.9.9.9:443'), 5000)).toEqual({
      reason: 'network_unreachable',
      error: 'connect EHOSTUNREACH 10.9.9.9:443',
    });
    expect(failureOf(fetchFailed('EAI_AGAIN', 'getaddrinfo EAI_AGAIN hooks.example'), 5000).reason).toBe('dns_failed');
    // Several addresses tried (an AggregateError under the fetch error): the first one's code.
    const aggregate = new TypeError('fetch failed', {
      cause: new AggregateError([Object.assign(new Error('connect ECONNREFUSED ::1:80'), { code: 'ECONNREFUSED' })], ''),
    });
    expect(failureOf(aggregate, 5000)).toEqual({ reason: 'connection_refused', error: 'connect ECONNREFUSED ::1:80' });
    expect(failureOf(new TypeError('fetch failed', { cause: new Error('something new') }), 5000)).toEqual({
      reason: 'request_failed',
      error: 'TypeError: fetch failed: Error: something new',
    });
  });
});
