import fc from 'fast-check';
import { Limits, RESERVED_NAMES } from './common';
import { appendSentinelOnce, hasSentinelMarker, parseSentinel, renderSentinel, SentinelDiagnosticCodeSchema, SentinelParse, stripSentinels } from './sentinel';
import { AgentRunConfig, DispatchStatus } from './sentinel-schema';

/** Names the contracts refuse (RESERVED_NAMES); fast-check proposes them on purpose. */
const notReserved = (name: string) => !(RESERVED_NAMES as readonly string[]).includes(name);

const agentName = fc.stringMatching(/^[A-Za-z0-9_-]{1,24}$/).filter(notReserved);

/** Free text that likes to contain what could break a comment, a line or a fence. */
const reason = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 80 }),
  fc
    .array(fc.constantFrom('-->', '<!--', '--!>', '\n', '\r\n', '\u2028', '```', '"', '\\', '{', '}', 'AGENT_RUN_CONFIG', 'é', '😀', ' '), {
      maxLength: 12,
    })
    .map((parts) => parts.join('')),
);

const dispatch = fc.record(
  {
    status: fc.constantFrom(...Object.values(DispatchStatus)),
    reason,
    task_hint: agentName,
    workflow: agentName,
    step: agentName,
    origin: fc.constantFrom('agent' as const, 'engine_fallback' as const),
  },
  { requiredKeys: ['status'] },
);

const functionCall = fc.record(
  { function: fc.constant('call_agent' as const), agent_name: agentName, callback: agentName },
  { requiredKeys: ['function', 'agent_name'] },
);

/** Every valid shape: at least one action, never task together with function_call. */
const validConfig: fc.Arbitrary<AgentRunConfig> = fc.oneof(
  fc.record({ task: agentName, dispatch }, { requiredKeys: ['task'] }),
  fc.record({ dispatch, function_call: functionCall }, { requiredKeys: ['function_call'] }),
  fc.record({ dispatch }),
);

const renderedSentinels = [
  renderSentinel({ dispatch: { status: 'advance' } }),
  renderSentinel({ function_call: { function: 'call_agent', agent_name: 'context', callback: 'architect' } }),
];

/** Bodies built from fragments that interact: markers, fences, line breaks, JSON, sentinels. */
const body = fc
  .array(
    fc.oneof(
      { weight: 3, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
      {
        weight: 5,
        arbitrary: fc.constantFrom(
          '\n',
          '\r\n',
          '\r',
          ' ',
          '\t',
          '```',
          '~~~',
          '````',
          '   ```js',
          '<!--',
          '<!-- ',
          '-->',
          'AGENT_',
          'RUN_CONFIG',
          'AGENT_RUN_CONFIG',
          '<!-- AGENT_RUN_CONFIG ',
          '<!--AGENT_RUN_CONFIG',
          '{',
          '}',
          '"',
          '{"dispatch":{"status":"advance"}}',
          '{"__proto__":{"x":1}}',
          '{}',
          ...renderedSentinels,
        ),
      },
    ),
    { maxLength: 40 },
  )
  .map((parts) => parts.join(''));

function expectOneOfThreeKinds(result: SentinelParse): void {
  switch (result.kind) {
    case 'config':
    case 'absent':
      return;
    case 'invalid':
      expect(SentinelDiagnosticCodeSchema.safeParse(result.code).success).toBe(true);
      expect(typeof result.diagnostic).toBe('string');
      expect(result.diagnostic.length).toBeGreaterThan(0);
      expect(result.diagnostic.length).toBeLessThanOrEqual(400);
      expect(result.diagnostic).not.toMatch(/[\n\r]/);
      return;
    default:
      throw new Error(`unexpected kind ${JSON.stringify(result)}`);
  }
}

describe('sentinel properties', () => {
  it('render → parse round trip: every valid config that fits the limit reads back equal', () => {
    fc.assert(
      fc.property(validConfig, body, (config, prefix) => {
        const line = renderSentinel(config);
        expect(line).not.toMatch(/[\n\r\u2028\u2029]/);
        expect(line.indexOf('-->')).toBe(line.length - 3);
        expect(parseSentinel(line)).toEqual({ kind: 'config', config });
        expect(parseSentinel(appendSentinelOnce(prefix, config))).toEqual({ kind: 'config', config });
      }),
      { numRuns: 2000 },
    );
  });

  it('appendOnce is idempotent and leaves exactly one sentinel, for arbitrary bodies', () => {
    fc.assert(
      fc.property(body, validConfig, (text, config) => {
        const once = appendSentinelOnce(text, config);
        expect(appendSentinelOnce(once, config)).toBe(once);
        expect(parseSentinel(once)).toEqual({ kind: 'config', config });
        expect(once.endsWith(renderSentinel(config))).toBe(true);
        expect(hasSentinelMarker(stripSentinels(once))).toBe(false);
      }),
      { numRuns: 3000 },
    );
  });

  it('stripSentinels is idempotent and changes a body exactly when it holds a sentinel', () => {
    fc.assert(
      fc.property(body, (text) => {
        const stripped = stripSentinels(text);
        expect(stripSentinels(stripped)).toBe(stripped);
        expect(hasSentinelMarker(stripped)).toBe(false);
        expect(parseSentinel(stripped)).toEqual({ kind: 'absent' });
        expect(stripped === text).toBe(parseSentinel(text).kind === 'absent');
      }),
      { numRuns: 3000 },
    );
  });

  it('a body without a marker keeps its text: appendOnce only trims the end and adds the sentinel line', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary', maxLength: 200 }).filter((t) => !t.includes('<!')),
        validConfig,
        (text, config) => {
          const out = appendSentinelOnce(text, config);
          expect(out.startsWith(text.trimEnd())).toBe(true);
        },
      ),
      { numRuns: 1000 },
    );
  });

  describe('parse never throws and always yields one of the three kinds', () => {
    it('for arbitrary strings (unicode, control characters)', () => {
      fc.assert(
        fc.property(fc.oneof(fc.string({ unit: 'binary', maxLength: 300 }), body), (text) => {
          expectOneOfThreeKinds(parseSentinel(text));
        }),
        { numRuns: 4000 },
      );
    });

    it('for arbitrary and nested JSON payloads, including __proto__ / constructor / prototype keys', () => {
      const key = fc.oneof(
        fc.string({ maxLength: 8 }),
        fc.constantFrom('__proto__', 'constructor', 'prototype', 'task', 'dispatch', 'function_call', 'status'),
      );
      const hostileJson = fc.letrec<{ value: string }>((tie) => ({
        value: fc.oneof(
          { depthSize: 'small', withCrossShrink: true },
          fc.json({ maxDepth: 3 }),
          fc.array(fc.tuple(key, tie('value')), { maxLength: 4 }).map((entries) => `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`),
          fc.array(tie('value'), { maxLength: 4 }).map((items) => `[${items.join(',')}]`),
        ),
      })).value;
      fc.assert(
        fc.property(
          hostileJson,
          fc.constantFrom('<!-- AGENT_RUN_CONFIG ', '<!--AGENT_RUN_CONFIG'),
          fc.constantFrom(' -->', '-->', '', '\n-->'),
          (json, open, close) => {
            expectOneOfThreeKinds(parseSentinel(`answer\n${open}${json}${close}`));
          },
        ),
        { numRuns: 3000 },
      );
    });

    it('a __proto__ / constructor / prototype key at any depth is always forbidden_key', () => {
      const forbidden = fc.constantFrom('__proto__', 'constructor', 'prototype');
      fc.assert(
        fc.property(forbidden, fc.integer({ min: 0, max: 6 }), fc.json({ maxDepth: 2 }), (key, depth, inner) => {
          let json = `{${JSON.stringify(key)}:${inner}}`;
          for (let level = 0; level < depth; level++) json = `{"dispatch":{"status":"advance","x":[${json}]}}`;
          const result = parseSentinel(`<!-- AGENT_RUN_CONFIG ${json} -->`);
          expect(result).toMatchObject({ kind: 'invalid', code: 'forbidden_key' });
        }),
        { numRuns: 1000 },
      );
    });

    it('for huge strings up to Limits.maxBodyChars', () => {
      const huge = fc
        .tuple(body, fc.integer({ min: 1, max: 4000 }))
        .map(([fragment, times]) => (fragment.length === 0 ? 'x' : fragment).repeat(times).slice(0, Limits.maxBodyChars));
      fc.assert(
        fc.property(huge, validConfig, (text, config) => {
          expectOneOfThreeKinds(parseSentinel(text));
          const once = appendSentinelOnce(text, config);
          expect(parseSentinel(once)).toEqual({ kind: 'config', config });
        }),
        { numRuns: 100 },
      );
    });
  });
});
