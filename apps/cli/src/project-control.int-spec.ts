import { randomBytes } from 'node:crypto';
import { connectNats, type NatsHandle } from '@baton/eventstore';
import type { Subscription } from 'nats';
import { main } from './main';
import { bufferedIo } from './output';

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const decoder = new TextDecoder();
const encoder = new TextEncoder();

/**
 * `baton pause` / `baton resume` go through the LedgerClient (real NATS, a stand-in ledger on the
 * command subject): a ledger that never answers is asked twice with the same body and the CLI says
 * the outcome is unknown, naming the key it made up; no ledger at all is `unavailable`; a refusal
 * keeps the ledger's code and, with --json, prints the ledger's reply.
 */
describe('baton pause / resume through the LedgerClient (real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;
  let sub: Subscription | undefined;
  const received: { subject: string; body: Record<string, unknown> }[] = [];

  async function baton(...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, { io, env: { NATS_URL, BATON_PREFIX: prefix, BATON_OPERATOR: 'olga' } });
    return { code, out: io.out(), err: io.err() };
  }

  /** A stand-in ledger on the admin's pause / resume subjects of project p1: `reply` answers (or, null, stays silent). */
  async function ledger(reply: ((command: string) => unknown) | null): Promise<void> {
    sub = nats.connection.subscribe(`${prefix}.cmd.ledger.p1.op.admin.*`, {
      callback: (_err, msg) => {
        received.push({ subject: msg.subject, body: JSON.parse(decoder.decode(msg.data)) as Record<string, unknown> });
        if (reply !== null) msg.respond(encoder.encode(JSON.stringify(reply(msg.subject.split('.').pop()!))));
      },
    });
    await nats.connection.flush();
  }

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, name: 'cli-project-control-int', reconnect: false });
  });
  afterAll(async () => {
    await nats.close();
  });
  beforeEach(() => {
    prefix = `pc${randomBytes(5).toString('hex')}`;
    received.length = 0;
  });
  afterEach(() => {
    sub?.unsubscribe();
    sub = undefined;
  });

  it('no ledger listening: unavailable, saying which subject and prefix', async () => {
    const typed = await baton('resume', 'p1', '--json');
    expect(typed.code).toBe(69);
    expect(typed.out).toBe('');
    const { error } = JSON.parse(typed.err) as { error: { code: string; message: string } };
    expect(error.code).toBe('unavailable');
    expect(error.message).toContain(`no ledger is listening on ${prefix}.cmd.ledger.p1.op.admin.resume`);
    expect(error.message).toContain(`BATON_PREFIX=${prefix}`);
  });

  it('a ledger that never answers: asked twice with the same body, then outcome_unknown naming the key the CLI made up', async () => {
    await ledger(null);
    const typed = await baton('pause', 'p1', '--reason', 'incident 12', '--json');
    expect(typed.code).toBe(1);
    expect(typed.out).toBe('');
    const { error } = JSON.parse(typed.err) as { error: { code: string; message: string; details: Record<string, unknown> } };
    expect(error.code).toBe('outcome_unknown');
    expect(received).toHaveLength(2);
    expect(received[1]).toEqual(received[0]);
    const key = received[0]!.body['idempotency_key'] as string;
    expect(key).toMatch(/^pause-\d+$/);
    expect(received[0]!.body).toEqual({ idempotency_key: key, reason: 'incident 12', actor: 'olga' });
    expect(error.details).toEqual({ idempotency_key: key });
    expect(error.message).toContain(`--key ${key}`);
  }, 30_000);

  it("a refusal keeps the ledger's code and details; --json prints the reply; an answer prints the project", async () => {
    await ledger((command) =>
      command === 'resume'
        ? { ok: false, error: { code: 'project_not_paused', kind: 'wrong_state', message: 'project p1 is not paused', details: { project: 'p1' } } }
        : {
            ok: true,
            project: {
              project: 'p1',
              status: 'paused',
              pause_id: 'pause-1',
              paused_by: 'olga',
              paused_at: '2026-12-06T00:00:00.000Z',
              reason: 'incident 12',
              version: 1,
            },
            events: 1,
          },
    );
    const refused = await baton('resume', 'p1', '--json');
    expect(refused.code).toBe(1);
    expect(JSON.parse(refused.out)).toMatchObject({ ok: false, error: { code: 'project_not_paused' } });
    expect(JSON.parse(refused.err)).toMatchObject({ error: { code: 'project_not_paused', details: { project: 'p1' } } });
    const paused = await baton('pause', 'p1', '--reason', 'incident 12');
    expect(paused).toMatchObject({ code: 0, err: '' });
    expect(paused.out).toMatch(/status: +paused/);
    expect(paused.out).toMatch(/changed: +true/);
    expect(received).toHaveLength(2);
  });
});
