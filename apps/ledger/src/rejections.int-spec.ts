import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Ajv2020 from 'ajv/dist/2020';
import { LedgerReplySchema, Limits, ledgerCommandSubject, Principals, type LedgerReply } from '@baton/contracts';
import { LedgerClient, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
import { DlqHeader, agentsOf, bootLedger, connectTest, deadLetters, deleteStreams, randomPrefix } from './int/support';

const P = 'shop';
const as = agentsOf(P);
const encoder = new TextEncoder();

describe('ledger rejections (real NATS): bad input gets a typed rejection reply, is recorded as a dead letter, and the ledger keeps serving', () => {
  const prefix = randomPrefix();
  let nats: NatsHandle;
  let ledger: RunningService;
  let client: LedgerClient;

  beforeAll(async () => {
    nats = await connectTest();
    ledger = await bootLedger(prefix, 'ledger-r');
    client = new LedgerClient(nats, prefix, { attempts: 1 });
  });

  afterAll(async () => {
    await ledger?.stop();
    if (nats) {
      await deleteStreams(nats, prefix);
      await nats.close();
    }
  });

  /** Send raw bytes as a request and decode the ledger's reply. */
  async function raw(subject: string, body: Uint8Array | string): Promise<LedgerReply> {
    const data = typeof body === 'string' ? encoder.encode(body) : body;
    const msg = await nats.connection.request(subject, data, { timeout: 5000 });
    return LedgerReplySchema.parse(JSON.parse(new TextDecoder().decode(msg.data)));
  }

  /** A command subject of agent alice (the subject names the caller). */
  const subject = (command: string, project = P) => ledgerCommandSubject(prefix, project, Principals.agent(project, 'alice'), command);

  /** The dead letter recorded for `bytes` (waits for it), with its reason: their copy, or a letter cut to their first bytes that names their digest. */
  async function deadLetterOf(bytes: Uint8Array) {
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    return waitFor(
      async () =>
        (await deadLetters(nats, prefix, 'ledger')).find(
          (m) => Buffer.from(m.data).equals(Buffer.from(bytes)) || (m.header(DlqHeader.truncated) !== undefined && m.header(DlqHeader.sha256) === sha256),
        ),
      'the dead letter of these bytes',
      { timeoutMs: 8000 },
    );
  }

  async function expectRejected(command: string, body: string | Uint8Array, code: string, project = P, on = subject(command, project)) {
    const bytes = typeof body === 'string' ? encoder.encode(body) : body;
    const reply = await raw(on, bytes);
    expect(reply).toMatchObject({ ok: false, error: { code, kind: 'rejected' } });
    const letter = await deadLetterOf(bytes);
    expect(letter.header(DlqHeader.reason)).toBe(code);
    expect(letter.header(DlqHeader.subject)).toBe(on);
    expect(letter.header(DlqHeader.source)).toBe('ledger');
    return reply;
  }

  const actor = { actor: 'alice', actor_kind: 'agent' };

  it('malformed JSON → malformed_json reply + dead letter with the original bytes', async () => {
    await expectRejected('create', '{"handoff_id": "h1", "summary": ', 'malformed_json');
  });

  it('schema violation → schema_violation reply naming the field + dead letter', async () => {
    const reply = await expectRejected('claim', JSON.stringify({ ...actor, handoff_id: 'h1' }), 'schema_violation');
    expect(!reply.ok && reply.error.details).toMatchObject({ issues: [expect.objectContaining({ path: 'idempotency_key' })] });
    // A prototype-polluting key is refused before any schema runs.
    await expectRejected('claim', `{"actor":"alice","actor_kind":"agent","handoff_id":"h1","idempotency_key":"k2","__proto__":{"x":1}}`, 'schema_violation');
  });

  it('oversized body (over Limits.maxMessageBytes) → payload_too_large reply + dead letter with its first 4 KiB', async () => {
    const big = JSON.stringify({ ...actor, handoff_id: 'h1', summary: 'x'.repeat(Limits.maxMessageBytes + 10), idempotency_key: 'big' });
    await expectRejected('create', big, 'payload_too_large');
    const bytes = encoder.encode(big);
    const letter = await deadLetterOf(bytes);
    expect(Buffer.from(letter.data).equals(Buffer.from(bytes.subarray(0, 4096)))).toBe(true);
    expect(letter.header(DlqHeader.detail)).toContain(`(first 4096 of ${bytes.length} bytes kept)`);
  });

  it('an unknown command, a subject that names no caller, or a body for another project is rejected and recorded', async () => {
    await expectRejected('explode', JSON.stringify({ ...actor, handoff_id: 'h1', idempotency_key: 'k' }), 'unknown_command');
    // The old subject without a principal, and principal tokens that name nobody.
    await expectRejected(
      'claim',
      JSON.stringify({ ...actor, handoff_id: 'h1', idempotency_key: 'k-old' }),
      'unknown_command',
      P,
      `${prefix}.cmd.ledger.${P}.claim`,
    );
    await expectRejected(
      'claim',
      JSON.stringify({ handoff_id: 'h1', idempotency_key: 'k-svc' }),
      'unknown_command',
      P,
      `${prefix}.cmd.ledger.${P}.svc.nobody.claim`,
    );
    const other = JSON.stringify({ ...actor, handoff_id: 'h1', project: 'elsewhere', from_agent: 'alice', summary: 's', idempotency_key: 'k' });
    await expectRejected('create', other, 'project_mismatch');
  });

  it('after every kind of bad input the ledger keeps serving: a valid create and claim succeed', async () => {
    await raw(subject('create'), '\u0000not json');
    const created = await client.create(P, { handoff_id: 'h-after', from_agent: 'alice', summary: 'still here', idempotency_key: 'after' }, as('alice'));
    expect(created).toMatchObject({ ok: true, handoff: { id: 'h-after', status: 'pending' } });
    expect(await client.claim(P, { handoff_id: 'h-after', idempotency_key: 'after-claim' }, as('bob'))).toMatchObject({
      ok: true,
      handoff: { status: 'claimed' },
    });
    // Nothing invalid reached the event store.
    expect(await client.get(P, 'h1')).toBeNull();
  });

  it('a handoff whose stored event cannot be decoded is answered event_undecodable (kind internal, naming the event), not unavailable forever; other handoffs are served', async () => {
    const created = await client.create(P, { handoff_id: 'h-broken', from_agent: 'alice', summary: 'to be broken', idempotency_key: 'broken' }, as('alice'));
    expect(created.ok).toBe(true);
    // Only services write events; a bug (or a hand) could store one no reader understands.
    const ack = await nats.js.publish(`${prefix}.ev.${P}.handoff.h-broken`, encoder.encode('{"not":"an event"'));
    const reply = await client.claim(P, { handoff_id: 'h-broken', idempotency_key: 'broken-claim' }, as('bob'));
    expect(reply).toMatchObject({
      ok: false,
      error: { code: 'event_undecodable', kind: 'internal', details: { subject: `${prefix}.ev.${P}.handoff.h-broken`, seq: ack.seq } },
    });
    const other = await client.create(P, { handoff_id: 'h-fine', from_agent: 'alice', summary: 'fine', idempotency_key: 'fine' }, as('alice'));
    expect(other).toMatchObject({ ok: true, handoff: { id: 'h-fine' } });
  });

  it('every reply (applied, retried, refused, rejected, forbidden) is valid under the published docs/schemas/ledger-reply.json; a body repeating its own actor is applied', async () => {
    const schema = JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'docs', 'schemas', 'ledger-reply.json'), 'utf8')) as Record<string, unknown>;
    const valid = new Ajv2020({ strict: false, allErrors: true, validateFormats: false }).compile(schema);
    /** The reply's JSON as sent (not parsed by zod, which would drop what it does not know). */
    async function reply(on: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
      const msg = await nats.connection.request(on, encoder.encode(JSON.stringify(body)), { timeout: 5000 });
      const json = JSON.parse(new TextDecoder().decode(msg.data)) as Record<string, unknown>;
      expect({ reply: json, valid: valid(json), errors: valid.errors ?? null }).toEqual({ reply: json, valid: true, errors: null });
      return json;
    }
    const bob = (command: string) => ledgerCommandSubject(prefix, P, Principals.agent(P, 'bob'), command);
    const create = { ...actor, handoff_id: 'h-json', project: P, from_agent: 'alice', summary: 'valid replies', idempotency_key: 'json-create' };
    expect(await reply(subject('create'), create)).toMatchObject({ ok: true, handoff: { id: 'h-json', status: 'pending' }, events: 1 });
    expect(await reply(subject('create'), create)).toMatchObject({ ok: true, handoff: { id: 'h-json' } });
    const claim = { handoff_id: 'h-json', idempotency_key: 'json-claim' };
    expect(await reply(bob('claim'), { ...claim, actor: 'bob', actor_kind: 'agent' })).toMatchObject({
      ok: true,
      handoff: { status: 'claimed', claimed_by: 'bob' },
    });
    expect(await reply(subject('claim'), { ...claim, idempotency_key: 'json-claim-2' })).toMatchObject({ ok: false, error: { kind: 'wrong_state' } });
    expect(await reply(subject('claim'), { handoff_id: 'h-json' })).toMatchObject({
      ok: false,
      error: { code: 'schema_violation', kind: 'rejected', details: {} },
    });
    expect(await reply(subject('claim'), { ...claim, actor: 'bob' })).toMatchObject({ ok: false, error: { code: 'identity_mismatch', kind: 'forbidden' } });
  });
});
