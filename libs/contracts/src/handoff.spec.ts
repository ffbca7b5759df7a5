import { z } from 'zod';
import {
  CompletionReportSchema,
  CreateHandoffCommandSchema,
  DecideHandbackCommandSchema,
  HandoffCommandSchemas,
  HandoffEventSchemas,
  HandoffRecordSchema,
  ReturnHandoffCommandSchema,
} from './handoff';

const report = { summary: 'done', outcome: 'completed', evidence: { tests_run: ['unit'] } };

describe('handoff wire contracts', () => {
  it('every ledger command carries an idempotency key', () => {
    for (const [name, schema] of Object.entries(HandoffCommandSchemas)) {
      const json = JSON.stringify(z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }));
      expect([name, json.includes('"idempotency_key"')]).toEqual([name, true]);
    }
    expect(ReturnHandoffCommandSchema.safeParse({ handoff_id: 'h1', report }).success).toBe(false);
  });

  it('known hole (a): a report cannot smuggle caller metadata that would switch the evidence floor off', () => {
    const parsed = ReturnHandoffCommandSchema.safeParse({
      handoff_id: 'h1',
      claim_id: 'c1',
      idempotency_key: 'k1',
      report: { ...report, metadata: { evidence_floor: false, actor_kind: 'operator' } },
    });
    expect(parsed.success).toBe(false);
  });

  it('the wire cannot name a handback`s reviewed worker (only the ledger`s handback policy does); a completion_handback kind parses so the ledger refuses it by its code', () => {
    const base = { handoff_id: 'h1', project: 'p', from_agent: 'alice', summary: 's', idempotency_key: 'k' };
    // The decider refuses it `handback_create_forbidden` (handoff.spec.ts, hole (c)); no schema error hides that code.
    expect(CreateHandoffCommandSchema.safeParse({ ...base, kind: 'completion_handback' }).success).toBe(true);
    expect(CreateHandoffCommandSchema.safeParse({ ...base, kind: 'completion_handback', reviewed_worker: 'bob' }).success).toBe(false);
    expect(CreateHandoffCommandSchema.parse(base)).toMatchObject({ kind: 'task', priority: 'medium', max_retries: 3 });
  });

  it('a rework decision says what to change; an accept needs no note', () => {
    expect(DecideHandbackCommandSchema.safeParse({ handoff_id: 'h', decision: 'rework', note: '  ', idempotency_key: 'k' }).success).toBe(false);
    expect(DecideHandbackCommandSchema.safeParse({ handoff_id: 'h', decision: 'accept', idempotency_key: 'k' }).success).toBe(true);
    // Missing or blank, one message (the operator API's): a client need not tell two zod texts apart.
    const messages = (body: object) => DecideHandbackCommandSchema.safeParse(body).error?.issues.map((i) => [i.path.join('.'), i.message]);
    const noteRule = [['note', 'a rework says what to change: write a note']];
    expect(messages({ handoff_id: 'h', decision: 'rework', idempotency_key: 'k' })).toEqual(noteRule);
    expect(messages({ handoff_id: 'h', decision: 'rework', note: '  ', idempotency_key: 'k' })).toEqual(noteRule);
  });

  it('a reason of spaces alone is refused as blank, not as too short', () => {
    const issues = HandoffCommandSchemas.abandon.safeParse({ handoff_id: 'h', reason: '   ', idempotency_key: 'k' }).error?.issues;
    expect(issues?.map((i) => [i.path.join('.'), i.message])).toEqual([['reason', 'must not be blank']]);
    expect(HandoffCommandSchemas.release.safeParse({ handoff_id: 'h', claim_id: 'c', reason: ' ', idempotency_key: 'k' }).error?.issues[0]?.message).toBe(
      'must not be blank',
    );
  });

  it('a completion report fills the optional lists and rejects unknown outcomes', () => {
    expect(CompletionReportSchema.parse(report)).toMatchObject({ files_changed: [], verification: '', next_steps: '' });
    expect(CompletionReportSchema.safeParse({ ...report, outcome: 'done' }).success).toBe(false);
  });

  it('event types are dotted lowercase handoff.* names', () => {
    for (const type of Object.keys(HandoffEventSchemas)) expect(type).toMatch(/^handoff\.[a-z_]+$/);
  });

  it('the record refuses impossible states (a claimed handoff without a lease; retry_count over the cap)', () => {
    const base = {
      id: 'h1',
      project: 'p',
      kind: 'task',
      priority: 'low',
      from_agent: 'alice',
      summary: 's',
      context: {},
      acceptance: {},
      retry: { max_retries: 1, retry_count: 0 },
      escalation: {},
      created_at: '2026-01-01T00:00:00Z',
      updated_at: '2026-01-01T00:00:00Z',
      version: 1,
    };
    expect(HandoffRecordSchema.safeParse({ ...base, status: 'pending' }).success).toBe(true);
    expect(HandoffRecordSchema.safeParse({ ...base, status: 'claimed', claimed_by: 'bob' }).success).toBe(false);
    expect(HandoffRecordSchema.safeParse({ ...base, status: 'pending', retry: { max_retries: 1, retry_count: 2 } }).success).toBe(false);
  });
});
