import { LedgerReplySchema, ledgerCommandSubject, Principals } from '@baton/contracts';
import { DlqSources } from '@baton/eventstore';
import type { NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { headers as natsHeaders } from 'nats';
import { waitFor } from '@baton/wait';
import { DlqHeader, bootLedger, connectTest, deadLetters, deleteStreams, randomPrefix } from './int/support';

const P = 'shop';
const encoder = new TextEncoder();

describe('ledger requests whose bytes are not UTF-8 (real NATS): refused invalid_utf8 and dead-lettered with that reason', () => {
  const prefix = randomPrefix();
  let nats: NatsHandle;
  let ledger: RunningService;

  beforeAll(async () => {
    nats = await connectTest('ledger-utf8-int');
    ledger = await bootLedger(prefix, 'ledger-utf8');
  });

  afterAll(async () => {
    await ledger?.stop();
    if (nats) {
      await deleteStreams(nats, prefix);
      await nats.close();
    }
  });

  const subject = (command: string) => ledgerCommandSubject(prefix, P, Principals.agent(P, 'alice'), command);

  it('a claim whose body holds a byte that is not UTF-8 — inside a JSON string, where replacing it would have given valid JSON — is answered invalid_utf8 (not malformed_json) and recorded as a dead letter with its bytes', async () => {
    const bytes = new Uint8Array([...encoder.encode('{"handoff_id":"h-'), 0xfe, ...encoder.encode('","idempotency_key":"k-1"}')]);
    const msg = await nats.connection.request(subject('claim'), bytes, { timeout: 5000 });
    const reply = LedgerReplySchema.parse(JSON.parse(new TextDecoder().decode(msg.data)));
    expect(reply).toMatchObject({ ok: false, error: { code: 'invalid_utf8', kind: 'rejected', message: expect.stringContaining('offset 17') } });

    const [letter] = await waitFor(
      async () => {
        const all = await deadLetters(nats, prefix, 'ledger');
        const mine = all.filter((m) => Buffer.from(m.data).equals(Buffer.from(bytes)));
        return mine.length > 0 ? mine : undefined;
      },
      'the dead letter of the request',
      { timeoutMs: 8000 },
    );
    expect(letter!.header(DlqHeader.reason)).toBe('invalid_utf8');
    expect(letter!.header(DlqHeader.subject)).toBe(subject('claim'));
    expect(letter!.header(DlqHeader.source)).toBe('ledger');
  });

  it('a stored handoff event the reactor cannot decode is dead-lettered at its first delivery, not retried until its deliveries run out', async () => {
    const headers = natsHeaders();
    headers.set('Baton-Event-Type', 'handoff.created');
    const bad = encoder.encode('{not an event');
    await nats.js.publish(`${prefix}.ev.${P}.handoff.h-poison`, bad, { headers });
    const [letter] = await waitFor(
      async () => {
        const all = await deadLetters(nats, prefix, DlqSources.ledgerHandoffReactor);
        const mine = all.filter((m) => Buffer.from(m.data).equals(Buffer.from(bad)));
        return mine.length > 0 ? mine : undefined;
      },
      'the dead letter of the event',
      { timeoutMs: 8000 },
    );
    expect(letter!.header(DlqHeader.deliveries)).toBe('1');
    expect(letter!.header(DlqHeader.reason)).not.toBe('max_deliveries');
  });

  it('the ledger keeps serving: the next request, in UTF-8, is decided on what it asks (the handoff it names does not exist), not refused for its bytes', async () => {
    const msg = await nats.connection.request(subject('claim'), encoder.encode('{"handoff_id":"h-é","idempotency_key":"k-2"}'), { timeout: 5000 });
    const reply = LedgerReplySchema.parse(JSON.parse(new TextDecoder().decode(msg.data)));
    expect(reply.ok).toBe(false);
    expect(!reply.ok && reply.error.code).not.toBe('invalid_utf8');
  });
});
