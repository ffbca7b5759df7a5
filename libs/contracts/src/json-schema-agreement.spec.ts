import Ajv2020 from 'ajv/dist/2020';
import fc from 'fast-check';
import { RESERVED_NAME_MESSAGE } from './common';
import { generateJsonSchemas, wireSchemas } from './json-schema';

/**
 * The published JSON Schemas hold the invariants the zod contracts enforce, tried as a team in
 * another language would: with a standard draft 2020-12 validator (ajv). A payload the schema
 * accepts is refused by Baton only for reasons no schema expresses (docs/schemas/README.md).
 */
const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
const json = generateJsonSchemas() as Record<string, Record<string, unknown>>;
const zod = wireSchemas();
const validator = (name: string) => ajv.compile(json[name]!);

function agree(name: string, payload: unknown): { zod: boolean; json: boolean } {
  return { zod: zod[name]!.safeParse(payload).success, json: validator(name)(payload) };
}

const now = '2026-12-01T10:00:00.000Z';
const result = (extra: Record<string, unknown>) => ({
  result_id: 'r-1',
  run_id: 'ar-1',
  project: 'acme',
  workflow_run_id: 'wr-1',
  agent: 'support',
  produced_at: now,
  ...extra,
});

describe('the published JSON Schemas state the invariants Baton enforces (ajv, draft 2020-12)', () => {
  it('every schema compiles under a standard validator', () => {
    for (const name of Object.keys(json)) expect(() => validator(name)).not.toThrow();
  });

  it.each([
    ['a decision with both task and function_call', { decision: { task: 'builder', function_call: { function: 'call_agent', agent_name: 'context' } } }, false],
    ['a decision with no action', { decision: {} }, false],
    ['a decision with task and dispatch', { decision: { task: 'builder', dispatch: { status: 'advance' } } }, true],
    ['a function_call alone', { decision: { function_call: { function: 'call_agent', agent_name: 'context', callback: 'architect' } } }, true],
    ['a cap on a policy stop', { stop: { why: 'policy', cap: { name: 'tokens', limit: 10 } } }, false],
    ['a policy stop', { stop: { why: 'policy' } }, true],
    ['a cap on a budget stop', { stop: { why: 'budget', cap: { name: 'tokens', limit: 10 } } }, true],
  ])('agent-result: %s → zod and the JSON Schema agree', (_what, extra, valid) => {
    expect(agree('agent-result', result(extra as Record<string, unknown>))).toEqual({ zod: valid, json: valid });
  });

  it('agent-run-config: any combination of task / dispatch / function_call is judged alike', () => {
    fc.assert(
      fc.property(fc.boolean(), fc.boolean(), fc.boolean(), (task, dispatch, call) => {
        const config = {
          ...(task ? { task: 'builder' } : {}),
          ...(dispatch ? { dispatch: { status: 'advance' } } : {}),
          ...(call ? { function_call: { function: 'call_agent', agent_name: 'context' } } : {}),
        };
        const verdict = agree('agent-run-config', config);
        expect(verdict.json).toBe(verdict.zod);
      }),
    );
  });

  it.each([
    ['no person to notify', {}, false],
    ['started_by', { started_by: 'dana' }, true],
    ['issue_author only', { issue_author: 'bot' }, true],
  ])('start-run-request: %s → zod and the JSON Schema agree', (_what, extra, valid) => {
    const request = { workflow_run_id: 'wr-1', project: 'acme', workflow: 'support', ...extra };
    expect(agree('start-run-request', request)).toEqual({ zod: valid, json: valid });
  });

  it('operator-answer: intent, raise_cap and rework need their field; the JSON Schema says so too', () => {
    const answer = (extra: Record<string, unknown>) => ({ packet_id: 'sp-1', answer_id: 'a-1', answered_by: 'dana', answered_at: now, ...extra });
    const cases: Array<[Record<string, unknown>, boolean]> = [
      [{ action: 'intent' }, false],
      [{ action: 'intent', intent: 'refund' }, true],
      [{ action: 'raise_cap' }, false],
      [{ action: 'raise_cap', cap: 20 }, true],
      [{ action: 'rework' }, false],
      [{ action: 'rework', note: '   ' }, false],
      [{ action: 'rework', note: 'add tests' }, true],
      [{ action: 'deny' }, true],
    ];
    for (const [extra, valid] of cases) {
      expect({ extra, ...agree('operator-answer', answer(extra)) }).toEqual({ extra, zod: valid, json: valid });
    }
  });
  it.each([
    ['variables with a "__proto__" key', '{"variables":{"__proto__":{"x":1},"a":1}}', false],
    ['variables with a "constructor" key', '{"variables":{"constructor":1}}', false],
    ['variables with a "toString" key', '{"variables":{"toString":1}}', true],
    ['a pending tool call with a "__proto__" argument', '{"pending_tool_call":{"name":"refund","args":{"__proto__":1}}}', false],
    ['a task named "__proto__"', '{"decision":{"task":"__proto__"}}', false],
    ['a pending tool call with a "prototype" argument', '{"pending_tool_call":{"name":"refund","args":{"prototype":1}}}', false],
    ['a pending tool call with a "valueOf" argument', '{"pending_tool_call":{"name":"refund","args":{"valueOf":1}}}', true],
    ['a task named "constructor"', '{"decision":{"task":"constructor"}}', false],
    ['a task named "toString"', '{"decision":{"task":"toString"}}', true],
  ])('agent-result: %s → zod and the JSON Schema agree (the parsed body holds it as an own member)', (_what, extra, valid) => {
    const payload = { ...result({}), ...(JSON.parse(extra) as Record<string, unknown>) };
    expect(agree('agent-result', payload)).toEqual({ zod: valid, json: valid });
  });

  it('a "__proto__" key is refused with an issue at its path, not dropped from the parsed value (zod alone would drop it)', () => {
    const parsed = zod['agent-result']!.safeParse({ ...result({}), variables: JSON.parse('{"__proto__":{"polluted":true},"a":1}') });
    expect(parsed.success).toBe(false);
    expect(parsed.error!.issues).toEqual([expect.objectContaining({ path: ['variables', '__proto__'], message: RESERVED_NAME_MESSAGE })]);
  });
});
