import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { main } from './main';
import { bufferedIo } from './output';

/**
 * An answer or decision whose POST the operator API never answers may have been carried out: the
 * CLI says so (`outcome_unknown`) and that sending it again with the same idempotency key is safe.
 * When the operator gave no key the CLI made one up, so it names the key it sent, in the message
 * and in `details`, or the advice could not be followed.
 *
 * A real HTTP server that reads the request and never replies; the CLI's 75 s wait is cut to a
 * fraction of a second by passing the real fetch a shorter timeout signal.
 */
describe('baton answer / decide when the operator API never answers (a real HTTP server)', () => {
  let server: Server;
  let apiUrl: string;
  const received: { url: string; body: Record<string, unknown> }[] = [];

  const impatientFetch = ((input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) =>
    fetch(input, { ...init, signal: AbortSignal.timeout(300) })) as typeof fetch;

  async function baton(...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, { io, env: { BATON_API_URL: apiUrl, BATON_TOKEN: 'bt_unused' }, fetch: impatientFetch });
    return { code, out: io.out(), err: io.err() };
  }

  beforeAll(async () => {
    server = createServer((req) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      // Read the request whole, then never reply.
      req.on('end', () => received.push({ url: req.url ?? '', body: JSON.parse(body) as Record<string, unknown> }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  beforeEach(() => {
    received.length = 0;
  });

  /** The one request the server received, once it has arrived whole. */
  async function sent(): Promise<{ url: string; body: Record<string, unknown> }> {
    for (let i = 0; i < 100 && received.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(received).toHaveLength(1);
    return received[0]!;
  }

  it('answer without --answer-id: outcome_unknown names the answer id it generated and sent (message and details.answer_id)', async () => {
    const typed = await baton('answer', 'stop-x', '--project', 'p1', '--action', 'deny', '--json');
    expect(typed.code).toBe(1);
    const request = await sent();
    expect(request.url).toBe('/v1/projects/p1/stops/stop-x/answer');
    const answerId = request.body['answer_id'] as string;
    expect(answerId).toMatch(/^cli-[0-9a-f-]{36}$/);
    const { error } = JSON.parse(typed.err) as { error: { code: string; message: string; details: Record<string, unknown> } };
    expect(error.code).toBe('outcome_unknown');
    expect(error.details).toEqual({ answer_id: answerId });
    expect(error.message).toContain(`--answer-id ${answerId}`);

    received.length = 0;
    const prose = await baton('answer', 'stop-x', '--project', 'p1', '--action', 'deny');
    expect(prose.code).toBe(1);
    expect(prose.err).toContain(`sending it again with --answer-id ${(await sent()).body['answer_id'] as string} is safe`);
  });

  it('answer with --answer-id names that one', async () => {
    const typed = await baton('answer', 'stop-x', '--project', 'p1', '--action', 'deny', '--answer-id', 'mine-1', '--json');
    expect(typed.code).toBe(1);
    expect((await sent()).body['answer_id']).toBe('mine-1');
    expect(JSON.parse(typed.err)).toMatchObject({ error: { code: 'outcome_unknown', details: { answer_id: 'mine-1' } } });
  });

  it('decide without --key: outcome_unknown names the idempotency key it generated and sent (message and details.idempotency_key)', async () => {
    const typed = await baton('decide', 'hb-1', 'accept', '--project', 'p1', '--json');
    expect(typed.code).toBe(1);
    const request = await sent();
    expect(request.url).toBe('/v1/projects/p1/handoffs/hb-1/decision');
    const key = request.body['idempotency_key'] as string;
    expect(key).toMatch(/^cli-/);
    const { error } = JSON.parse(typed.err) as { error: { code: string; message: string; details: Record<string, unknown> } };
    expect(error.code).toBe('outcome_unknown');
    expect(error.details).toEqual({ idempotency_key: key });
    expect(error.message).toContain(`--key ${key}`);
    expect(error.message).not.toContain('--answer-id');
  });
});
