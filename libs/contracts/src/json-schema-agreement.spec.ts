import Ajv2020 from 'ajv/dist/2020';
import fc from 'fast-check';
import { NOT_BLANK, RESERVED_NAME_MESSAGE } from './common';
import { createEventRegistry } from './catalogue';
import { generateJsonSchemas, READ_ONLY_WIRE_SCHEMAS, wireSchemas } from './json-schema';
import { LedgerIdentityClaimKeys, resolveLedgerCaller, splitIdentityClaims } from './ledger-access';
import { Principals } from './principal';
import { parseIgnoringUnknownKeys } from './tolerant';

/**
 * The published JSON Schemas hold the invariants the zod contracts enforce, tried as a team in
 * another language would: with a standard draft 2020-12 validator (ajv). A payload the schema
 * accepts is refused by Baton only for reasons no schema expresses (docs/schemas/README.md).
 */
const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
const json = generateJsonSchemas() as Record<string, Record<string, unknown>>;
const zod = wireSchemas();
const validator = (name: string) => ajv.compile(json[name]!);

/** zod's verdict as Baton's own readers give it (records they read tolerate keys a newer writer added), beside the JSON Schema's. */
function agree(name: string, payload: unknown): { zod: boolean; json: boolean } {
  const parsed = READ_ONLY_WIRE_SCHEMAS.has(name) ? parseIgnoringUnknownKeys(zod[name]!, payload) : zod[name]!.safeParse(payload);
  return { zod: parsed.success, json: validator(name)(payload) };
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
    ['a whole cap in whole numbers', { stop: { why: 'budget', cap: { name: 'tool_calls', limit: 10, used: 10, whole: true } } }, true],
    ['a whole cap with a fractional limit', { stop: { why: 'budget', cap: { name: 'tool_calls', limit: 10.5, whole: true } } }, false],
    ['a whole cap with a fractional use', { stop: { why: 'budget', cap: { name: 'tool_calls', limit: 10, used: 9.5, whole: true } } }, false],
    ['a fractional cap not said to be whole', { stop: { why: 'budget', cap: { name: 'cost_usd', limit: 2.5, used: 2.51, whole: false } } }, true],
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

describe("the operator HTTP API's request bodies: the published schema and what the API parses agree (ajv, draft 2020-12)", () => {
  it.each([
    ['the least answer', { action: 'deny' }, true],
    ['every field of an approve', { answer_id: 'a-1', action: 'approve', pending_digest: 'd1', note: 'ok', answered_by: 'olga' }, true],
    ['an approve of a packet that freezes no call (its digest null, as the packet shows it)', { action: 'approve', pending_digest: null }, true],
    ['an intent with its intent', { action: 'intent', intent: 'refund' }, true],
    ['an intent without one', { action: 'intent' }, false],
    ['a raise_cap with its cap', { action: 'raise_cap', cap: 20 }, true],
    ['a raise_cap without one', { action: 'raise_cap' }, false],
    ['a deny with a cap (not a raise)', { action: 'deny', cap: 20 }, false],
    ['a deny with an intent', { action: 'deny', intent: 'refund' }, false],
    ["accept: a handback's decision, not a stop form's button", { action: 'accept' }, false],
    ["rework with its note: a handback's decision too", { action: 'rework', note: 'add tests' }, false],
    ["the recorded answer's packet_id (the API sets it)", { action: 'deny', packet_id: 'sp-1' }, false],
    ["the recorded answer's answered_at (the API sets it)", { action: 'deny', answered_at: now }, false],
    ['a note with a control character', { action: 'deny', note: 'no\u0007' }, false],
  ])('operator-answer-request: %s → zod and the JSON Schema agree', (_what, body, valid) => {
    expect(agree('operator-answer-request', body)).toEqual({ zod: valid, json: valid });
  });

  it('operator-answer.json is the recorded answer, not the request: a minimal request is not a recorded answer, a recorded answer is not a request', () => {
    const recorded = { packet_id: 'sp-1', answer_id: 'a-1', action: 'deny', answered_by: 'olga', answered_at: now };
    expect(agree('operator-answer', { action: 'deny' })).toEqual({ zod: false, json: false });
    expect(agree('operator-answer-request', { action: 'deny' })).toEqual({ zod: true, json: true });
    expect(agree('operator-answer', recorded)).toEqual({ zod: true, json: true });
    expect(agree('operator-answer-request', recorded)).toEqual({ zod: false, json: false });
  });

  it.each([
    ['a continue', { action: 'continue', hold_cause: { kind: 'result', id: 'r-1' } }, true],
    ['a reroute with its target', { action: 'reroute', target: 'billing' }, true],
    ['a reroute without one', { action: 'reroute' }, false],
    ['a terminate with a target', { action: 'terminate', target: 'billing' }, false],
    ["a stop form's action", { action: 'deny' }, false],
  ])('hold-answer-request: %s → zod and the JSON Schema agree', (_what, body, valid) => {
    expect(agree('hold-answer-request', body)).toEqual({ zod: valid, json: valid });
  });

  it.each([
    ['an accept', { decision: 'accept' }, true],
    ["an accept repeating the token's name", { decision: 'accept', actor: 'olga', idempotency_key: 'k' }, true],
    ['a rework with a note', { decision: 'rework', note: 'add tests' }, true],
    ['a rework without one', { decision: 'rework' }, false],
    ['a rework whose note is white space', { decision: 'rework', note: ' \t ' }, false],
    ['a rework whose note is invisible characters alone', { decision: 'rework', note: '\u200b\u202e' }, false],
    ['an actor name with a space', { decision: 'accept', actor: 'dana smith' }, false],
  ])('handback-decision-request: %s → zod and the JSON Schema agree', (_what, body, valid) => {
    expect(agree('handback-decision-request', body)).toEqual({ zod: valid, json: valid });
  });

  it.each([
    ['abandon-handoff-request', 'a reason', { reason: 'duplicate', actor: 'olga' }, true],
    ['abandon-handoff-request', 'no reason', {}, false],
    ['abandon-handoff-request', 'an invisible reason', { reason: '\u200b' }, false],
    ['project-pause-request', 'a reason, forced', { reason: 'incident 12', force: true, idempotency_key: 'k' }, true],
    ['project-pause-request', 'an actor (the kill switch takes none from the body)', { reason: 'incident 12', actor: 'ada' }, false],
    ['project-resume-request', 'nothing', {}, true],
    ['project-resume-request', 'a force', { force: true }, false],
    ['notice-redeliver-request', 'nothing', {}, true],
    ['notice-redeliver-request', 'any field', { webhook: 'x' }, false],
  ])('%s: %s → zod and the JSON Schema agree', (name, _what, body, valid) => {
    expect(agree(name, body)).toEqual({ zod: valid, json: valid });
  });
});

describe('mesh requests have published JSON Schemas that agree with zod (ajv, draft 2020-12)', () => {
  const start = { mesh_run_id: 'mr-1', project: 'acme', mesh: 'support-mesh' };
  it.each([
    ['the least start', {}, true],
    ['input, started_by and variables', { input: 'my card was charged twice', started_by: 'dana', variables: { tier: 'gold' } }, true],
    ['an unknown field', { priority: 'high' }, false],
    ['a mesh named "__proto__"', { mesh: '__proto__' }, false],
    ['variables with a "constructor" key', { variables: JSON.parse('{"constructor":1}') as unknown }, false],
    ['no mesh_run_id', { mesh_run_id: undefined }, false],
  ])('mesh-start-request: %s → zod and the JSON Schema agree', (_what, extra, valid) => {
    const request = JSON.parse(JSON.stringify({ ...start, ...extra })) as unknown;
    expect(agree('mesh-start-request', request)).toEqual({ zod: valid, json: valid });
  });

  const answer = (extra: Record<string, unknown>) => ({ packet_id: 'sp-1', answer_id: 'a-1', answered_by: 'dana', answered_at: now, ...extra });
  it.each([
    ['raise_cap with its cap', 'operator', { action: 'raise_cap', cap: 60 }, true],
    ['raise_cap without a cap', 'operator', { action: 'raise_cap' }, false],
    ['deny by an admin', 'admin', { action: 'deny' }, true],
    ['a role no operator holds', 'owner', { action: 'deny' }, false],
  ])('mesh-answer-request: %s → zod and the JSON Schema agree', (_what, role, extra, valid) => {
    const request = { mesh_run_id: 'mr-1', project: 'acme', actor_role: role, answer: answer(extra) };
    expect(agree('mesh-answer-request', request)).toEqual({ zod: valid, json: valid });
  });
});

/** A pending handoff record as the ledger writes it. */
const pendingHandoff = {
  id: 'h1',
  project: 'acme',
  kind: 'task',
  priority: 'low',
  status: 'pending',
  from_agent: 'alice',
  summary: 's',
  context: {},
  acceptance: {},
  retry: { max_retries: 1, retry_count: 0 },
  escalation: {},
  created_at: now,
  updated_at: now,
  version: 1,
};

describe('the ledger reply has a published JSON Schema that agrees with zod (ajv, draft 2020-12)', () => {
  const handoff = pendingHandoff;
  it.each([
    ['an applied command', { ok: true, handoff, events: 1 }, true],
    ['a retry (events 0)', { ok: true, handoff, events: 0 }, true],
    ['a domain refusal', { ok: false, error: { code: 'handoff_not_pending', kind: 'wrong_state', message: 'handoff h1 is claimed' } }, true],
    [
      'a rejection with its issues',
      {
        ok: false,
        error: { code: 'schema_violation', kind: 'rejected', message: 'bad', details: { issues: [{ path: 'idempotency_key', message: 'Required' }] } },
      },
      true,
    ],
    ['an access refusal', { ok: false, error: { code: 'identity_mismatch', kind: 'forbidden', message: 'agent alice is alice' } }, true],
    ['a success without its events count', { ok: true, handoff }, false],
    ['an error of no known kind', { ok: false, error: { code: 'x', kind: 'teapot', message: 'm' } }, false],
    ['an error without a code', { ok: false, error: { kind: 'invalid', message: 'm' } }, false],
  ])('ledger-reply: %s → zod and the JSON Schema agree', (_what, reply, valid) => {
    expect(agree('ledger-reply', reply)).toEqual({ zod: valid, json: valid });
  });
});

describe('what Baton writes may gain fields; what a client sends may not (ajv and zod agree)', () => {
  const handoff = { ...pendingHandoff, retry: { ...pendingHandoff.retry, added_later: 1 }, added_later: 'a newer ledger wrote this' };

  it('every read-only schema names a generated wire schema, and none of them says additionalProperties: false at any depth', () => {
    expect(READ_ONLY_WIRE_SCHEMAS.size).toBeGreaterThanOrEqual(8);
    for (const name of READ_ONLY_WIRE_SCHEMAS) {
      expect(Object.keys(json)).toContain(name);
      expect(JSON.stringify(json[name])).not.toContain('"additionalProperties":false');
    }
    // Requests keep refusing unlisted keys.
    for (const name of ['agent-result', 'start-run-request', 'mesh-start-request', 'ledger-claim-handoff', 'operator-answer'])
      expect(JSON.stringify(json[name])).toContain('"additionalProperties":false');
  });

  it.each([
    ['ledger-reply', { ok: true, handoff, events: 1, added_later: true }],
    ['handoff-record', handoff],
    ['ledger-open-offers-reply', { ok: true, stream: 'S', durable: 'd', added_later: 1 }],
    ['ledger-reply', { ok: false, error: { code: 'handoff_not_pending', kind: 'wrong_state', message: 'm', added_later: 1 } }],
  ])('%s with fields a newer Baton added: valid for the JSON Schema and for Baton’s own readers', (name, record) => {
    expect(agree(name, record)).toEqual({ zod: true, json: true });
  });

  it('a record with a field of the wrong type is still refused by both (only unlisted keys are tolerated)', () => {
    expect(agree('handoff-record', { ...handoff, version: 'one' })).toEqual({ zod: false, json: false });
    expect(agree('ledger-reply', { ok: true, handoff, events: -1, added_later: true })).toEqual({ zod: false, json: false });
  });

  it.each([
    ['start-run-request', { workflow_run_id: 'wr-1', project: 'acme', workflow: 'w', started_by: 'sam', added_later: 1 }],
    ['agent-result', result({ body: 'done', added_later: 1 })],
    ['mesh-start-request', { mesh_run_id: 'm-1', project: 'acme', mesh: 'support', added_later: 1 }],
  ])('%s with a key it does not list: refused by both (a typo is not silently dropped)', (name, request) => {
    expect(agree(name, request)).toEqual({ zod: false, json: false });
  });
});

describe('ledger command schemas state the envelope fields the ledger accepts (actor, actor_kind, actor_role)', () => {
  const commands = Object.keys(json).filter((name) => name.startsWith('ledger-') && !name.endsWith('-reply'));

  it('every ledger command schema lists exactly the claims the ledger splits off, each optional', () => {
    expect(commands.length).toBeGreaterThan(10);
    const split = Object.keys(splitIdentityClaims({}).claims).sort();
    expect([...LedgerIdentityClaimKeys].sort()).toEqual(split);
    for (const name of commands) {
      const schema = json[name]!;
      const branches = (schema['oneOf'] ?? [schema]) as Array<Record<string, unknown>>;
      for (const branch of branches) {
        const properties = Object.keys(branch['properties'] as Record<string, unknown>);
        expect({ name, claims: split.filter((key) => properties.includes(key)) }).toEqual({ name, claims: split });
        expect({ name, required: ((branch['required'] as string[] | undefined) ?? []).filter((key) => split.includes(key)) }).toEqual({ name, required: [] });
      }
    }
  });

  const claim = { handoff_id: 'h-1', idempotency_key: 'claim-h-1' };
  it.each([
    ['no envelope', {}, true],
    ['the agent repeating its own name and kind', { actor: 'builder', actor_kind: 'agent' }, true],
    ['the notifier naming the operator and role it relays', { actor: 'dana@acme', actor_kind: 'operator', actor_role: 'operator' }, true],
    ['an actor kind that does not exist', { actor_kind: 'robot' }, false],
    ['a role no operator holds', { actor_role: 'owner' }, false],
    ['an actor name with a space', { actor: 'dana smith' }, false],
    ['any other unknown field', { acting_for: 'dana' }, false],
  ])('ledger-claim-handoff: %s → zod and the JSON Schema agree', (_what, extra, valid) => {
    expect(agree('ledger-claim-handoff', { ...claim, ...extra })).toEqual({ zod: valid, json: valid });
  });

  it('a body with the actor its subject names is valid under the JSON Schema AND accepted by the ledger`s identity check', () => {
    const body = { ...claim, actor: 'builder', actor_kind: 'agent' };
    expect(agree('ledger-claim-handoff', body)).toEqual({ zod: true, json: true });
    const { claims, command } = splitIdentityClaims(body);
    expect(resolveLedgerCaller(Principals.agent('acme', 'builder'), claims)).toMatchObject({ ok: true, caller: { actor: 'builder', kind: 'agent' } });
    expect(zod['ledger-claim-handoff']!.safeParse(command).success).toBe(true);
    // Valid under the schema, yet another principal's subject refuses it: only the ledger knows who sent it.
    expect(resolveLedgerCaller(Principals.agent('acme', 'reviewer'), claims)).toMatchObject({ ok: false, code: 'identity_mismatch' });
  });

  it('every command takes a matching actor: decide_handback (a union), create, complete_then_create (at its top level only)', () => {
    const actor = { actor: 'baton-router', actor_kind: 'system' };
    const decide = { handoff_id: 'h-1', decision: 'rework', note: 'add tests', idempotency_key: 'k', actor: 'builder', actor_kind: 'agent' };
    expect(agree('ledger-decide-handback', decide)).toEqual({ zod: true, json: true });
    const create = { handoff_id: 'h-2', project: 'acme', from_agent: 'builder', summary: 's', idempotency_key: 'k' };
    expect(agree('ledger-create-handoff', { ...create, ...actor })).toEqual({ zod: true, json: true });
    const complete = { handoff_id: 'h-1', result_id: 'r-1', agent: 'builder', idempotency_key: 'k' };
    expect(agree('ledger-complete-then-create', { complete, create, ...actor })).toEqual({ zod: true, json: true });
    // The ledger splits the claims off the request, not off its parts: a part that names an actor is refused.
    expect(agree('ledger-complete-then-create', { complete: { ...complete, ...actor }, create })).toEqual({ zod: false, json: false });
    expect(agree('ledger-open-offers', { actor: 'builder', actor_kind: 'agent', ack_wait_ms: 60_000 })).toEqual({ zod: true, json: true });
  });
});

describe('a text the ledger refuses as blank is refused by its JSON Schema too (NOT_BLANK, its pattern)', () => {
  // Every field refused as blank (String.prototype.trim leaves nothing): the ledger commands', and an
  // operator answer's rework note (its pattern `\\S`, ECMAScript's), each with a body valid but for it.
  const fields: Array<[string, string, Record<string, unknown>]> = [
    ['ledger-release-handoff', 'reason', { handoff_id: 'h-1', claim_id: 'c-1', idempotency_key: 'k' }],
    ['ledger-fail-handoff', 'reason', { handoff_id: 'h-1', idempotency_key: 'k' }],
    ['ledger-abandon-handoff', 'reason', { handoff_id: 'h-1', idempotency_key: 'k' }],
    ['ledger-give-up-offer', 'reason', { handoff_id: 'h-1', deliveries: 3, idempotency_key: 'k' }],
    ['ledger-decide-handback', 'note', { handoff_id: 'h-1', decision: 'rework', idempotency_key: 'k' }],
    ['ledger-complete-from-result', 'summary', { handoff_id: 'h-1', result_id: 'r-1', agent: 'builder', idempotency_key: 'k' }],
    ['ledger-pause', 'reason', { idempotency_key: 'k' }],
    ['operator-answer', 'note', { packet_id: 'sp-1', answer_id: 'a-1', action: 'rework', answered_by: 'dana', answered_at: now }],
  ];
  // White space of every kind trim removes: ASCII, Unicode space separators, line and paragraph separators, the BOM.
  const blank = ['', ' ', '   ', '\t\n\r\v\f', '\u00a0', '\u1680', '\u2000\u200a', '\u2028\u2029', '\u202f\u205f', '\u3000', '\ufeff', ' \u3000\t\ufeff '];
  // Text, or characters that are not white space to trim (so the ledger takes them): invisible format
  // characters, C1 and ASCII information separators (white space to Python's \s, not to ECMAScript's).
  const notBlank = ['x', '  why  ', '\u200b', '\u200e', '\u2060', '\u180e', '\u0085', '\u001c', ' \u00ad '];

  it.each(fields)('%s: a blank %s is refused by zod and by the JSON Schema; anything else trim keeps is taken by both', (name, field, body) => {
    for (const text of blank) expect({ text, ...agree(name, { ...body, [field]: text }) }).toEqual({ text, zod: false, json: false });
    for (const text of notBlank) expect({ text, ...agree(name, { ...body, [field]: text }) }).toEqual({ text, zod: true, json: true });
  });

  it('the ledger says "must not be blank" of a blank reason, its own words of a blank rework note and pause reason', () => {
    const message = (name: string, body: Record<string, unknown>) => zod[name]!.safeParse(body).error?.issues.map((issue) => issue.message);
    expect(message('ledger-release-handoff', { handoff_id: 'h-1', reason: '\u3000 ', idempotency_key: 'k' })).toEqual(['must not be blank']);
    expect(message('ledger-decide-handback', { handoff_id: 'h-1', decision: 'rework', note: '\t', idempotency_key: 'k' })).toEqual([
      'a rework says what to change: write a note',
    ]);
    expect(message('ledger-pause', { reason: ' ', idempotency_key: 'k' })).toEqual(['a pause says why']);
  });

  it('NOT_BLANK finds exactly what trim keeps, code point by code point (the list it writes out is the engine`s white space)', () => {
    const differ: string[] = [];
    for (let code = 0; code <= 0x10ffff; code++) {
      if (code >= 0xd800 && code <= 0xdfff) continue;
      const text = String.fromCodePoint(code);
      if (NOT_BLANK.test(text) !== (text.trim() !== '')) differ.push(code.toString(16));
    }
    expect(differ).toEqual([]);
  });
});

describe('event.json: an event of the stream with the payload of its type (ajv, draft 2020-12)', () => {
  const registry = createEventRegistry();
  const envelope = (type: string, payload: unknown, version = 1) => ({
    id: 'e-1',
    type,
    version,
    aggregate: { kind: 'project', id: 'acme' },
    project: 'acme',
    occurredAt: now,
    actor: 'admin',
    origin: 'operator',
    causationId: null,
    correlationId: 'acme',
    payload,
  });
  const paused = { project: 'acme', at: now, idempotency_key: 'k-1', pause_id: 'p-1', paused_by: 'admin', reason: 'incident 12' };

  it('holds a conditional for every registered event type, at its current version', () => {
    const conditions = (json['event']!['allOf'] as { if: { properties: { type: { const: string }; version: { const: number } } } }[]).map((c) => [
      c.if.properties.type.const,
      c.if.properties.version.const,
    ]);
    expect(conditions).toEqual(registry.types().map((type) => [type, registry.currentVersion(type)]));
  });

  it.each([
    ['a valid project.paused', envelope('project.paused', paused), true],
    ['a project.paused with a field a newer Baton added', envelope('project.paused', { ...paused, note: 'new' }), true],
    ['a project.paused without its reason', envelope('project.paused', { ...paused, reason: undefined }), false],
    ['a project.paused whose pause_id is a number', envelope('project.paused', { ...paused, pause_id: 7 }), false],
    [
      'another version than the current (its payload unchecked: readers upcast an older one, refuse a newer one)',
      envelope('project.paused', { anything: true }, 2),
      true,
    ],
  ])('%s → the same verdict as the registry', (_what, event, valid) => {
    expect(validator('event')(JSON.parse(JSON.stringify(event)))).toBe(valid);
    const decoded = registry.decode(JSON.parse(JSON.stringify(event)));
    // The registry refuses a version newer than it knows; the schema leaves versions other than the current unchecked.
    if ((event as { version: number }).version === registry.currentVersion('project.paused')) expect(decoded.ok).toBe(valid);
  });
});
