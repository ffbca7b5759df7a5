import fc from 'fast-check';
import type { z } from 'zod';
import { AgentResultSchema } from './agent-result';
import { Limits } from './common';
import { ProjectDefinitionSchema } from './definition';
import { EventEnvelopeSchema } from './envelope';
import { HandoffCommandSchemas } from './handoff';
import { parseUntrustedJson, rejectionFromZod, RejectionSchema, type Rejection } from './rejection';
import { RunAnswerRequestSchema, StartRunRequestSchema, StopRunRequestSchema } from './run-requests';
import { parseSentinel, SentinelDiagnosticCodeSchema } from './sentinel';
import { OperatorAnswerSchema } from './stop-packet';

/**
 * Hostile input against every wire schema, decoded exactly as the entry points do: the bytes'
 * text through `parseUntrustedJson(text, Limits.maxMessageBytes)` (size cap, JSON, forbidden
 * prototype keys), then `schema.safeParse`. Every input must end in a valid value or a typed
 * rejection, within a bounded time, without throwing and without touching Object.prototype.
 */

type Outcome = { ok: true; value: unknown } | { ok: false; rejection: Rejection };

function decode(schema: z.ZodType, text: string): Outcome {
  const json = parseUntrustedJson(text, Limits.maxMessageBytes);
  if (!json.ok) return json;
  const parsed = schema.safeParse(json.value);
  return parsed.success ? { ok: true, value: parsed.data } : { ok: false, rejection: rejectionFromZod(parsed.error) };
}

const NOW = '2025-03-01T12:00:00.000Z';

/** One valid message per schema: the seed every mutation starts from. */
const valid: Record<string, { schema: z.ZodType; sample: Record<string, unknown> }> = {
  AgentResult: {
    schema: AgentResultSchema,
    sample: {
      result_id: 'r-1',
      run_id: 'ar-1',
      project: 'demo',
      workflow_run_id: 'wr-1',
      agent: 'architect',
      body: 'Done.\n<!-- AGENT_RUN_CONFIG {"dispatch":{"status":"advance"}} -->',
      evidence: { tests_run: ['unit'] },
      variables: { k: 1 },
      produced_at: NOW,
    },
  },
  StartRunRequest: {
    schema: StartRunRequestSchema,
    sample: { workflow_run_id: 'wr-1', project: 'demo', workflow: 'feature', started_by: 'dana', input: 'hello' },
  },
  StopRunRequest: {
    schema: StopRunRequestSchema,
    sample: { packet_id: 'sp-1', workflow_run_id: 'wr-1', project: 'demo', why: 'budget', requested_by: 'baton-watchdog' },
  },
  RunAnswerRequest: {
    schema: RunAnswerRequestSchema,
    sample: {
      workflow_run_id: 'wr-1',
      project: 'demo',
      actor_role: 'operator',
      answer: { kind: 'stop_answer', answer: { packet_id: 'sp-1', answer_id: 'a-1', action: 'acknowledge', answered_by: 'olga', answered_at: NOW } },
    },
  },
  OperatorAnswer: { schema: OperatorAnswerSchema, sample: { packet_id: 'sp-1', answer_id: 'a-1', action: 'deny', answered_by: 'olga', answered_at: NOW } },
  ProjectDefinition: {
    schema: ProjectDefinitionSchema,
    sample: {
      project: 'demo',
      agents: [{ name: 'architect', role: 'Architect' }, { name: 'context' }],
      workflows: [
        {
          name: 'feature',
          version: 1,
          entry: 'analyze',
          steps: [
            { id: 'analyze', agent: 'architect', next: 'context' },
            { id: 'context', agent: 'context', terminal: true },
          ],
        },
      ],
    },
  },
  EventEnvelope: {
    schema: EventEnvelopeSchema,
    sample: {
      id: 'ev-1',
      type: 'handoff.claimed',
      version: 1,
      aggregate: { kind: 'handoff', id: 'h-1' },
      project: 'demo',
      occurredAt: NOW,
      actor: 'builder',
      origin: 'agent',
      causationId: null,
      correlationId: 'c-1',
      payload: {},
    },
  },
  'ledger.create': {
    schema: HandoffCommandSchemas.create,
    sample: { handoff_id: 'h-1', project: 'demo', from_agent: 'lead', to_agent: 'builder', summary: 'do it', idempotency_key: 'k-1' },
  },
  'ledger.claim': { schema: HandoffCommandSchemas.claim, sample: { handoff_id: 'h-1', lease_ms: 60_000, idempotency_key: 'k-1' } },
  'ledger.heartbeat': { schema: HandoffCommandSchemas.heartbeat, sample: { handoff_id: 'h-1', claim_id: 'c-1', idempotency_key: 'k-1' } },
  'ledger.return': {
    schema: HandoffCommandSchemas.return,
    sample: {
      handoff_id: 'h-1',
      claim_id: 'c-1',
      report: { summary: 'done', outcome: 'completed', evidence: { tests_run: ['unit'] } },
      idempotency_key: 'k-1',
    },
  },
  'ledger.decide_handback': {
    schema: HandoffCommandSchemas.decide_handback,
    sample: { handoff_id: 'h-1', decision: 'rework', note: 'again', idempotency_key: 'k-1' },
  },
  'ledger.release': { schema: HandoffCommandSchemas.release, sample: { handoff_id: 'h-1', claim_id: 'c-1', reason: 'busy', idempotency_key: 'k-1' } },
  'ledger.abandon': { schema: HandoffCommandSchemas.abandon, sample: { handoff_id: 'h-1', reason: 'gone', idempotency_key: 'k-1' } },
  'ledger.fail': { schema: HandoffCommandSchemas.fail, sample: { handoff_id: 'h-1', reason: 'broke', idempotency_key: 'k-1' } },
  'ledger.archive': { schema: HandoffCommandSchemas.archive, sample: { handoff_id: 'h-1', idempotency_key: 'k-1' } },
  'ledger.requeue_expired': { schema: HandoffCommandSchemas.requeue_expired, sample: { handoff_id: 'h-1', claim_id: 'c-1', idempotency_key: 'k-1' } },
  'ledger.complete_from_result': {
    schema: HandoffCommandSchemas.complete_from_result,
    sample: { handoff_id: 'h-1', result_id: 'r-1', agent: 'builder', summary: 'ok', idempotency_key: 'r-1' },
  },
};
const entries = Object.entries(valid);

/** Hostile scalars: unicode edge cases, control characters, numbers JSON cannot hold exactly. */
const nastyString = fc.oneof(
  fc.constantFrom(
    '\ud800',
    'a\udfffb',
    '\u202eevil\u202c',
    '\u200b',
    '\u200d\ufeff',
    '\u0000',
    '\u0007\u001b[2J',
    '\r\n',
    '\u2028\u2029',
    'ﷺ',
    '𝕏'.repeat(40),
    '../../etc/passwd',
    'baton.ev.>',
    '*',
    '',
    ' ',
    '__proto__',
    'constructor',
    '<!-- AGENT_RUN_CONFIG {"task":"x"} -->',
  ),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: fc.constantFrom('\u0000', '\u001f', '\u007f', '\ud800', '\udc00', '\u202e', '\u200b', 'a', '.'), maxLength: 30 }),
);
const nastyScalar = fc.oneof(
  nastyString,
  fc.constantFrom(null, true, false, 0, -0, -1, 1e308, -1e308, 2 ** 53 + 1, 0.1, 1e-320),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);
const nastyValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: nastyScalar },
  { weight: 1, arbitrary: fc.array(nastyScalar, { maxLength: 4 }) },
  { weight: 1, arbitrary: fc.dictionary(nastyString, nastyScalar, { maxKeys: 4 }) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
);

/** A valid sample with one field replaced (wrong type, unicode, control characters) or removed, or a key added. */
function mutated(sample: Record<string, unknown>): fc.Arbitrary<string> {
  const keys = Object.keys(sample);
  return fc.oneof(
    fc.record({ key: fc.constantFrom(...keys), value: nastyValue }).map(({ key, value }) => JSON.stringify({ ...sample, [key]: value })),
    fc.constantFrom(...keys).map((key) => {
      const copy = { ...sample };
      delete copy[key];
      return JSON.stringify(copy);
    }),
    fc.record({ key: nastyString, value: nastyValue }).map(({ key, value }) => JSON.stringify({ ...sample, [key]: value })),
  );
}

/** JSON text with a prototype key placed at the top level or nested (JSON.stringify cannot write `__proto__` as data). */
function protoKeyed(sample: Record<string, unknown>): fc.Arbitrary<string> {
  return fc
    .record({
      key: fc.constantFrom('__proto__', 'constructor', 'prototype'),
      payload: fc.constantFrom('{"polluted":"yes"}', '{"prototype":{"polluted":"yes"}}', '"x"', '[1]', 'null'),
      nested: fc.boolean(),
    })
    .map(({ key, payload, nested }) => {
      const body = JSON.stringify(sample).slice(1, -1);
      const injected = `"${key}":${payload}`;
      return nested ? `{${body},"variables":{${injected}},"context":{"a":{${injected}}}}` : `{${injected},${body}}`;
    });
}

/** Truncated, padded and garbled JSON around a valid sample. */
function brokenJson(sample: Record<string, unknown>): fc.Arbitrary<string> {
  const text = JSON.stringify(sample);
  return fc.oneof(
    fc.integer({ min: 0, max: text.length - 1 }).map((cut) => text.slice(0, cut)),
    fc.integer({ min: 1, max: text.length - 1 }).map((cut) => text.slice(cut)),
    fc
      .record({ at: fc.integer({ min: 0, max: text.length }), junk: fc.string({ unit: 'binary', maxLength: 6 }) })
      .map(({ at, junk }) => text.slice(0, at) + junk + text.slice(at)),
    fc.constantFrom(
      '',
      ' ',
      'null',
      '[]',
      '0',
      '"str"',
      'true',
      '{',
      '}',
      '{"a":1,}',
      "{'a':1}",
      'NaN',
      'Infinity',
      '\ufeff{}',
      `${text}${text}`,
      `${text}\u0000`,
    ),
  );
}

/** Pathological shapes: deep nesting (10,000 levels), huge strings, huge arrays, the size cap ± 1. */
function pathological(sample: Record<string, unknown>): string[] {
  const deepArray = `${'['.repeat(10_000)}${']'.repeat(10_000)}`;
  const deepObject = `${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`;
  const firstKey = Object.keys(sample)[0] as string;
  const withValue = (raw: string) => JSON.stringify({ ...sample, [firstKey]: '§' }).replace('"§"', raw);
  const cap = Limits.maxMessageBytes;
  const filler = (bytes: number) => JSON.stringify({ ...sample, [firstKey]: '' }).replace('""', `"${'x'.repeat(bytes)}"`);
  const base = JSON.stringify({ ...sample, [firstKey]: '' }).length;
  return [
    deepArray,
    deepObject,
    withValue(deepArray),
    withValue(deepObject),
    JSON.stringify({ ...sample, variables: { deep: '§' } }).replace('"§"', deepObject),
    JSON.stringify({ ...sample, context: { deep: '§' } }).replace('"§"', deepArray),
    JSON.stringify({ ...sample, payload: { deep: '§' } }).replace('"§"', deepArray),
    JSON.stringify({ ...sample, body: 'x'.repeat(Limits.maxBodyChars + 1) }),
    JSON.stringify({ ...sample, [firstKey]: 'é'.repeat(100_000) }),
    JSON.stringify({ ...sample, tried: Array.from({ length: 20_000 }, () => ({ name: 'x' })) }),
    JSON.stringify({ ...sample, [firstKey]: Array.from({ length: 30_000 }, (_, i) => i) }),
    filler(cap - base),
    filler(cap - base + 1),
    'x'.repeat(cap + 1),
    '😀'.repeat(cap / 4 + 1),
  ];
}

/**
 * A hang guard, not a speed claim (speed is measured by `npm run bench`): the CPU time one decode
 * may take. Decoding any of these inputs normally costs well under 10 ms; catastrophic
 * backtracking or a quadratic walk over a 1 MB input would cost seconds. CPU time of this process
 * (not wall time) so a busy machine does not fail the test.
 */
const cpuBudgetMs = 1_000;
const cpuMs = (since: NodeJS.CpuUsage): number => {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1_000;
};
let inputs = 0;

/** Decode one input and assert the contract: a valid value or a typed rejection, in bounded time, no pollution. */
function expectTyped(name: string, schema: z.ZodType, text: string): void {
  inputs++;
  const started = process.cpuUsage();
  let outcome: Outcome;
  try {
    outcome = decode(schema, text);
  } catch (error) {
    throw new Error(`${name}: decoding threw ${String(error)} for input ${JSON.stringify(text.slice(0, 200))}`);
  }
  const elapsed = cpuMs(started);
  if (elapsed > cpuBudgetMs)
    throw new Error(`${name}: decoding used ${elapsed.toFixed(0)} ms of CPU (hang guard ${cpuBudgetMs} ms) for input of ${text.length} chars`);
  if (outcome.ok) {
    expect(schema.safeParse(outcome.value).success).toBe(true);
    // Whatever an entry point accepts it stores as JSON: the value must serialise again.
    expect(() => JSON.stringify(outcome.value)).not.toThrow();
  } else {
    expect(RejectionSchema.safeParse(outcome.rejection).success).toBe(true);
    // invalid_utf8: a \u escape of a lone surrogate (no character).
    expect(['payload_too_large', 'malformed_json', 'schema_violation', 'invalid_utf8']).toContain(outcome.rejection.code);
  }
}

describe('hostile input: every wire schema through parseUntrustedJson + safeParse, as the entry points decode', () => {
  const prototypeKeys = Object.getOwnPropertyNames(Object.prototype).sort();
  const arrayPrototypeKeys = Object.getOwnPropertyNames(Array.prototype).sort();

  afterAll(() => {
    // No prototype pollution, whatever was decoded.
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(prototypeKeys);
    expect(Object.getOwnPropertyNames(Array.prototype).sort()).toEqual(arrayPrototypeKeys);
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
    // Several thousand generated inputs across the schemas.
    expect(inputs).toBeGreaterThanOrEqual(5_000);
  });

  it.each(entries)('%s: the valid seed decodes (so mutations start from something accepted)', (name, { schema, sample }) => {
    const decoded = decode(schema, JSON.stringify(sample));
    expect(decoded.ok ? 'ok' : decoded.rejection).toBe('ok');
    expectTyped(name, schema, JSON.stringify(sample));
  });

  it.each(entries)(
    '%s: a field of the wrong type, with unicode edge cases or control characters, or missing, or an extra key → valid or a typed rejection',
    (name, { schema, sample }) => {
      fc.assert(
        fc.property(mutated(sample), (text) => expectTyped(name, schema, text)),
        { numRuns: 150 },
      );
    },
  );

  it.each(entries)('%s: truncated and garbled JSON → malformed_json (or a typed rejection), never a throw', (name, { schema, sample }) => {
    fc.assert(
      fc.property(brokenJson(sample), (text) => expectTyped(name, schema, text)),
      { numRuns: 80 },
    );
  });

  it.each(entries)('%s: __proto__ / constructor / prototype keys are refused and pollute nothing', (name, { schema, sample }) => {
    fc.assert(
      fc.property(protoKeyed(sample), (text) => {
        const outcome = decode(schema, text);
        expect(outcome.ok).toBe(false);
        if (!outcome.ok) expect(outcome.rejection.code).toBe('schema_violation');
        expectTyped(name, schema, text);
      }),
      { numRuns: 30 },
    );
  });

  it.each(entries)('%s: arbitrary JSON values and arbitrary text → valid or a typed rejection', (name, { schema }) => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v) ?? 'null'),
          fc.string({ unit: 'binary', maxLength: 200 }),
        ),
        (text) => expectTyped(name, schema, text),
      ),
      { numRuns: 60 },
    );
  });

  it.each(entries)(
    '%s: 10,000-level nesting, huge strings and arrays, and the size cap ± 1 byte are refused with a type, in bounded time',
    (name, { schema, sample }) => {
      const cases = pathological(sample);
      for (const text of cases) expectTyped(name, schema, text);
      // 10,000 levels of nesting never reach the schema: JSON decoding refuses them (the reviver that
      // screens prototype keys runs out of stack and that is caught as malformed_json).
      for (const text of cases.slice(0, 4).concat(cases.slice(4, 7))) expect(decode(schema, text).ok).toBe(false);
      const cap = Limits.maxMessageBytes;
      const over = cases.filter((text) => Buffer.byteLength(text, 'utf8') > cap);
      expect(over.length).toBeGreaterThanOrEqual(2);
      for (const text of over) {
        const outcome = decode(schema, text);
        expect(outcome.ok ? 'ok' : outcome.rejection.code).toBe('payload_too_large');
      }
    },
  );
});

describe('hostile input: the sentinel parser', () => {
  const sentinelBody = fc.oneof(
    fc.string({ unit: 'binary', maxLength: 300 }),
    fc.jsonValue({ maxDepth: 3 }).map((v) => `text <!-- AGENT_RUN_CONFIG ${JSON.stringify(v)} --> tail`),
    fc.record({ json: fc.string({ unit: 'binary', maxLength: 60 }), pre: nastyString }).map(({ json, pre }) => `${pre}<!-- AGENT_RUN_CONFIG ${json} -->`),
    fc.constantFrom(
      `<!-- AGENT_RUN_CONFIG {"__proto__":{"polluted":"yes"},"task":"x"} -->`,
      `<!-- AGENT_RUN_CONFIG {"constructor":{"prototype":{"polluted":"yes"}}} -->`,
      `<!-- AGENT_RUN_CONFIG ${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)} -->`,
      `<!-- AGENT_RUN_CONFIG ${'['.repeat(10_000)}${']'.repeat(10_000)} -->`,
      `<!-- AGENT_RUN_CONFIG {"task":"${'x'.repeat(Limits.maxSentinelBytes)}"} -->`,
      `${'<!-- AGENT_RUN_CONFIG '.repeat(5_000)}`,
      `${'<!-- '.repeat(20_000)}`,
      `\u202e<!-- AGENT_RUN_CONFIG {"task":"\ud800"} -->`,
      `<!--\u0000AGENT_RUN_CONFIG {"task":"x"}\u0000-->`,
    ),
  );

  it('any body parses to a config, an absent sentinel or a typed diagnostic, in bounded time, without pollution', () => {
    fc.assert(
      fc.property(sentinelBody, (body) => {
        inputs++;
        const started = process.cpuUsage();
        const parsed = parseSentinel(body);
        expect(cpuMs(started)).toBeLessThan(cpuBudgetMs);
        expect(['config', 'absent', 'invalid']).toContain(parsed.kind);
        if (parsed.kind === 'invalid') {
          expect(SentinelDiagnosticCodeSchema.safeParse(parsed.code).success).toBe(true);
          expect(typeof parsed.diagnostic).toBe('string');
        }
        expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
      }),
      { numRuns: 1_500 },
    );
  });
});
