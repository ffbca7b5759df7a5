import { z } from 'zod';
import { LedgerReplySchema } from './ledger-protocol';
import { parseIgnoringUnknownKeys } from './tolerant';

describe('readers of what Baton wrote ignore keys a newer build added', () => {
  const record = {
    id: 'h-1',
    project: 'acme',
    kind: 'task',
    priority: 'medium',
    status: 'pending',
    from_agent: 'alice',
    summary: 'write the parser',
    context: {},
    acceptance: {},
    retry: { max_retries: 3, retry_count: 0 },
    escalation: {},
    created_at: '2026-12-05T00:00:00.000Z',
    updated_at: '2026-12-05T00:00:00.000Z',
    version: 1,
  };

  it('a ledger reply whose record carries a field this client does not know parses without it; the strict parse refuses it', () => {
    const reply = { ok: true, events: 1, handoff: { ...record, sla_minutes: 30, retry: { max_retries: 3, retry_count: 0, backoff: 'linear' } } };
    expect(LedgerReplySchema.safeParse(reply).success).toBe(false);
    const parsed = parseIgnoringUnknownKeys(LedgerReplySchema, reply);
    expect(parsed.success && parsed.data).toEqual({ ok: true, events: 1, handoff: record });
    // The value read is not changed in place.
    expect(reply.handoff).toHaveProperty('sla_minutes', 30);
  });

  it('anything else wrong beside an unknown key still refuses it', () => {
    const parsed = parseIgnoringUnknownKeys(LedgerReplySchema, { ok: true, events: -1, handoff: { ...record, sla_minutes: 30 } });
    expect(parsed.success).toBe(false);
    const strict = z.strictObject({ a: z.number() });
    expect(parseIgnoringUnknownKeys(strict, { a: 'x', b: 1 }).success).toBe(false);
    expect(parseIgnoringUnknownKeys(strict, { a: 1, b: 1 })).toEqual({ success: true, data: { a: 1 } });
  });
});
