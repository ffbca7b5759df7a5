import { Limits } from './common';
import {
  appendSentinelOnce,
  hasSentinelMarker,
  parseSentinel,
  renderSentinel,
  SentinelDiagnosticCode,
  SentinelError,
  SentinelParse,
  stripSentinels,
} from './sentinel';
import { AgentRunConfig } from './sentinel-schema';

const advance: AgentRunConfig = { dispatch: { status: 'advance' } };
const callContext: AgentRunConfig = { function_call: { function: 'call_agent', agent_name: 'context', callback: 'architect' } };

function expectInvalid(result: SentinelParse, code: SentinelDiagnosticCode, ...fragments: string[]): string {
  expect(result.kind).toBe('invalid');
  if (result.kind !== 'invalid') throw new Error('unreachable');
  expect(result.code).toBe(code);
  for (const fragment of fragments) expect(result.diagnostic).toContain(fragment);
  return result.diagnostic;
}

function countMarkers(body: string): number {
  return body.split('AGENT_RUN_CONFIG').length - 1;
}

describe("the seed's literal sentinels", () => {
  it('D1: the dispatch-only sentinel {"dispatch": {"status": "advance"}} passes validation', () => {
    expect(parseSentinel('answer\n\n<!-- AGENT_RUN_CONFIG {"dispatch": {"status": "advance"}} -->')).toEqual({
      kind: 'config',
      config: { dispatch: { status: 'advance' } },
    });
  });

  it('seed 000 §5 provenance: a dispatch may carry origin "agent" or "engine_fallback", and it round-trips', () => {
    for (const origin of ['agent', 'engine_fallback'] as const) {
      const config: AgentRunConfig = { dispatch: { status: 'advance', origin } };
      expect(parseSentinel(`<!-- AGENT_RUN_CONFIG {"dispatch":{"status":"advance","origin":"${origin}"}} -->`)).toEqual({ kind: 'config', config });
      expect(renderSentinel(config)).toBe(`<!-- AGENT_RUN_CONFIG {"dispatch":{"status":"advance","origin":"${origin}"}} -->`);
    }
    expectInvalid(parseSentinel('<!-- AGENT_RUN_CONFIG {"dispatch":{"status":"advance","origin":"human"}} -->'), 'schema', 'dispatch.origin');
    expectInvalid(parseSentinel('<!-- AGENT_RUN_CONFIG {"dispatch":{"status":"advance","origin":"operator"}} -->'), 'schema', 'dispatch.origin');
  });

  it('a function_call with a callback return address parses', () => {
    const body = '<!-- AGENT_RUN_CONFIG {"function_call": {"function": "call_agent", "agent_name": "context", "callback": "architect"}} -->';
    expect(parseSentinel(body)).toEqual({ kind: 'config', config: callContext });
  });

  it('a function_call without a callback parses (the engine fills the callback in)', () => {
    const body = '<!-- AGENT_RUN_CONFIG {"function_call": {"function": "call_agent", "agent_name": "context"}} -->';
    expect(parseSentinel(body)).toEqual({ kind: 'config', config: { function_call: { function: 'call_agent', agent_name: 'context' } } });
  });

  it('at least one action is required: an empty payload {} is invalid', () => {
    expectInvalid(parseSentinel('<!-- AGENT_RUN_CONFIG {} -->'), 'invariant', 'at least one action is required', 'task, dispatch or function_call');
  });

  it('task and function_call are mutually exclusive', () => {
    const body = '<!-- AGENT_RUN_CONFIG {"task": "review", "function_call": {"function": "call_agent", "agent_name": "context"}} -->';
    expectInvalid(parseSentinel(body), 'invariant', 'task and function_call are mutually exclusive');
  });

  it('a legacy task-only sentinel parses', () => {
    expect(parseSentinel('<!-- AGENT_RUN_CONFIG {"task": "review"} -->')).toEqual({ kind: 'config', config: { task: 'review' } });
  });
});

describe('renderSentinel', () => {
  it('renders exactly one line <!-- AGENT_RUN_CONFIG {compact json} -->', () => {
    expect(renderSentinel(advance)).toBe('<!-- AGENT_RUN_CONFIG {"dispatch":{"status":"advance"}} -->');
  });

  it('is deterministic: key order is task, dispatch, function_call and schema field order inside each', () => {
    const scrambled = {
      dispatch: { step: 's', workflow: 'w', task_hint: 'h', reason: 'r', status: 'hold' },
      task: 't',
    } as AgentRunConfig;
    expect(renderSentinel(scrambled)).toBe(
      '<!-- AGENT_RUN_CONFIG {"task":"t","dispatch":{"status":"hold","reason":"r","task_hint":"h","workflow":"w","step":"s"}} -->',
    );
    const call = { function_call: { callback: 'architect', agent_name: 'context', function: 'call_agent' } } as AgentRunConfig;
    expect(renderSentinel(call)).toBe(renderSentinel(callContext));
  });

  it('escapes < and > so a --> or <!-- inside a string value cannot break the comment', () => {
    const line = renderSentinel({ dispatch: { status: 'hold', reason: 'a --> b <!-- c\nd\u2028e' } });
    expect(line).not.toMatch(/[\n\r\u2028]/);
    expect(line.indexOf('-->')).toBe(line.length - 3);
    expect(line.lastIndexOf('<!--')).toBe(0);
    expect(line).toContain('\\u003e');
    expect(parseSentinel(`text\n${line}`)).toEqual({ kind: 'config', config: { dispatch: { status: 'hold', reason: 'a --> b <!-- c\nd\u2028e' } } });
  });

  it('throws a typed SentinelError for an invalid config (rendering invalid state is a programmer error)', () => {
    expect(() => renderSentinel({} as AgentRunConfig)).toThrow(SentinelError);
    try {
      renderSentinel({ dispatch: { status: 'later' } } as unknown as AgentRunConfig);
      throw new Error('expected a throw');
    } catch (error) {
      expect(error).toBeInstanceOf(SentinelError);
      expect((error as SentinelError).code).toBe('unknown_status');
      expect((error as SentinelError).name).toBe('SentinelError');
    }
  });

  it('refuses to render a payload over Limits.maxSentinelBytes, since it could not be read back', () => {
    expect(() => renderSentinel({ dispatch: { status: 'hold', reason: '<'.repeat(Limits.maxShortText) } })).toThrow(/too|bytes/);
  });
});

describe('parseSentinel diagnostics say what was wrong', () => {
  it('absent: a body with no sentinel', () => {
    expect(parseSentinel('just an answer')).toEqual({ kind: 'absent' });
    expect(parseSentinel('')).toEqual({ kind: 'absent' });
    expect(parseSentinel('<!-- a normal comment -->')).toEqual({ kind: 'absent' });
  });

  it('bad_json: names the JSON error', () => {
    expectInvalid(parseSentinel('<!-- AGENT_RUN_CONFIG {"dispatch": } -->'), 'bad_json', 'not valid JSON');
    expectInvalid(parseSentinel('<!-- AGENT_RUN_CONFIG -->'), 'bad_json', 'empty');
    expectInvalid(parseSentinel('<!-- AGENT_RUN_CONFIG {"task": "a"} trailing -->'), 'bad_json', 'JSON');
  });

  it('not_object: the payload must be a JSON object', () => {
    expectInvalid(parseSentinel('<!-- AGENT_RUN_CONFIG ["dispatch"] -->'), 'not_object', 'an array');
    expectInvalid(parseSentinel('<!-- AGENT_RUN_CONFIG null -->'), 'not_object', 'null');
    expectInvalid(parseSentinel('<!-- AGENT_RUN_CONFIG "advance" -->'), 'not_object', 'a string');
  });

  it('unknown_status: names the status and lists the allowed ones', () => {
    expectInvalid(
      parseSentinel('<!-- AGENT_RUN_CONFIG {"dispatch": {"status": "advnace"}} -->'),
      'unknown_status',
      '"advnace"',
      'advance, hold, loop, terminate',
    );
  });

  it('schema: other field errors name the field path', () => {
    expectInvalid(
      parseSentinel('<!-- AGENT_RUN_CONFIG {"function_call": {"function": "call_agent", "agent_name": "two words"}} -->'),
      'schema',
      'function_call.agent_name',
    );
    expectInvalid(parseSentinel('<!-- AGENT_RUN_CONFIG {"dispatch": {"status": "advance", "bogus": 1}} -->'), 'schema', 'dispatch', 'bogus');
    expectInvalid(parseSentinel('<!-- AGENT_RUN_CONFIG {"dispatch": {}} -->'), 'schema', 'dispatch.status');
  });

  it('multiple: more than one sentinel is invalid and the diagnostic says how many', () => {
    const body = `${renderSentinel(advance)}\ntext\n${renderSentinel(advance)}\n<!-- AGENT_RUN_CONFIG {} -->`;
    expectInvalid(parseSentinel(body), 'multiple', '3');
  });

  it('too_large: a payload over Limits.maxSentinelBytes says both sizes', () => {
    const reason = 'x'.repeat(Limits.maxSentinelBytes);
    const diagnostic = expectInvalid(
      parseSentinel(`<!-- AGENT_RUN_CONFIG {"dispatch": {"status": "hold", "reason": "${reason}"}} -->`),
      'too_large',
      String(Limits.maxSentinelBytes),
    );
    expect(diagnostic).toMatch(/is \d+ bytes/);
  });

  it('unterminated: a marker with no closing -->', () => {
    expectInvalid(parseSentinel('answer\n<!-- AGENT_RUN_CONFIG {"dispatch": {"status": "advance"}}\nmore'), 'unterminated', '-->');
  });

  it.each(['__proto__', 'constructor', 'prototype'])('forbidden_key: a "%s" key is refused', (key) => {
    expectInvalid(parseSentinel(`<!-- AGENT_RUN_CONFIG {"dispatch": {"status": "advance", "${key}": {"x": 1}}} -->`), 'forbidden_key', key);
  });

  it('diagnostics are one line and bounded even when the payload is hostile', () => {
    const diagnostic = expectInvalid(parseSentinel(`<!-- AGENT_RUN_CONFIG {"dispatch": {"status": "${'\\n'.repeat(3000)}"}} -->`), 'unknown_status');
    expect(diagnostic).not.toMatch(/[\n\r]/);
    expect(diagnostic.length).toBeLessThanOrEqual(400);
  });
});

describe('parseSentinel tolerance', () => {
  it('tolerates whitespace variations <!--AGENT_RUN_CONFIG{...}-->', () => {
    for (const body of [
      '<!--AGENT_RUN_CONFIG{"dispatch":{"status":"advance"}}-->',
      '<!--   AGENT_RUN_CONFIG   {"dispatch":{"status":"advance"}}   -->',
      '<!--\tAGENT_RUN_CONFIG\t{ "dispatch" : { "status" : "advance" } }\t-->',
      'text <!-- AGENT_RUN_CONFIG {"dispatch":{"status":"advance"}} --> more text',
    ]) {
      expect(parseSentinel(body)).toEqual({ kind: 'config', config: advance });
    }
  });

  it('tolerates CRLF line endings', () => {
    expect(parseSentinel('answer\r\n\r\n<!-- AGENT_RUN_CONFIG {"dispatch": {"status": "advance"}} -->\r\n')).toEqual({
      kind: 'config',
      config: advance,
    });
  });

  it('reads a legacy sentinel whose JSON spans lines', () => {
    expect(parseSentinel('<!-- AGENT_RUN_CONFIG\n{\n  "dispatch": {"status": "advance"}\n}\n-->')).toEqual({ kind: 'config', config: advance });
  });

  it('a --> inside a JSON string of a legacy sentinel does not cut the payload', () => {
    expect(parseSentinel('<!-- AGENT_RUN_CONFIG {"dispatch": {"status": "hold", "reason": "a --> b"}} -->')).toEqual({
      kind: 'config',
      config: { dispatch: { status: 'hold', reason: 'a --> b' } },
    });
  });

  it('a longer word is not the marker: AGENT_RUN_CONFIGURATION is ordinary text', () => {
    expect(parseSentinel('<!-- AGENT_RUN_CONFIGURATION notes -->')).toEqual({ kind: 'absent' });
  });
});

describe('sentinels inside fenced code blocks are quoted text, not decisions', () => {
  const quoted = '<!-- AGENT_RUN_CONFIG {"dispatch": {"status": "hold"}} -->';

  it('a body whose only sentinel is inside a ``` fence parses as absent', () => {
    expect(parseSentinel(`Example:\n\`\`\`\n${quoted}\n\`\`\`\nDone.`)).toEqual({ kind: 'absent' });
  });

  it('a body whose only sentinel is inside a ~~~ fence parses as absent', () => {
    expect(parseSentinel(`Example:\n~~~markdown\n${quoted}\n~~~\n`)).toEqual({ kind: 'absent' });
  });

  it('an unclosed fence runs to the end of the body', () => {
    expect(parseSentinel(`Example:\n\`\`\`\n${quoted}\n`)).toEqual({ kind: 'absent' });
  });

  it('a fenced sentinel does not count towards multiple; the real one decides', () => {
    expect(parseSentinel(`\`\`\`\n${quoted}\n\`\`\`\n${renderSentinel(advance)}`)).toEqual({ kind: 'config', config: advance });
  });

  it('a fence closes only with the same character and at least the opening length', () => {
    expect(parseSentinel(`\`\`\`\`\n\`\`\`\n~~~\n${quoted}\n\`\`\`\``)).toEqual({ kind: 'absent' });
    expect(parseSentinel(`\`\`\`\n\`\`\`\n${quoted}`).kind).toBe('config');
  });

  it('a line indented four spaces is not a fence', () => {
    expect(parseSentinel(`    \`\`\`\n${quoted}`).kind).toBe('config');
  });
});

describe('stripSentinels and hasSentinelMarker', () => {
  it('removes every sentinel outside fences, malformed ones included, in any position', () => {
    const body = [
      '<!-- AGENT_RUN_CONFIG {"task": "a"} -->',
      'intro <!--AGENT_RUN_CONFIG{"bad": } --> tail',
      'answer',
      '<!-- AGENT_RUN_CONFIG {"dispatch": {"status": "advance"}',
      '```',
      '<!-- AGENT_RUN_CONFIG {"quoted": true} -->',
      '```',
    ].join('\n');
    expect(stripSentinels(body)).toBe(['intro  tail', 'answer', '```', '<!-- AGENT_RUN_CONFIG {"quoted": true} -->', '```'].join('\n'));
  });

  it('is idempotent, also when a removal joins text into a new marker', () => {
    const nested = '<!-- AGENT_<!-- AGENT_RUN_CONFIG {"task":"x"} -->RUN_CONFIG {"task":"y"} -->keep';
    expect(stripSentinels(nested)).toBe('keep');
    expect(hasSentinelMarker(stripSentinels(nested))).toBe(false);
    expectInvalid(parseSentinel(nested), 'multiple', '2');
  });

  it('hasSentinelMarker is true for any sentinel outside fences, valid or not, and false for fenced ones', () => {
    expect(hasSentinelMarker('x <!-- AGENT_RUN_CONFIG nonsense')).toBe(true);
    expect(hasSentinelMarker(renderSentinel(advance))).toBe(true);
    expect(hasSentinelMarker('```\n<!-- AGENT_RUN_CONFIG {} -->\n```')).toBe(false);
    expect(hasSentinelMarker('AGENT_RUN_CONFIG mentioned in prose')).toBe(false);
  });
});

describe('appendSentinelOnce', () => {
  it('appends exactly one rendered sentinel on its own last line', () => {
    expect(appendSentinelOnce('The answer.\n', advance)).toBe(`The answer.\n${renderSentinel(advance)}`);
    expect(appendSentinelOnce('', advance)).toBe(renderSentinel(advance));
  });

  it('removes every existing sentinel, including malformed ones, before appending', () => {
    const body = '<!-- AGENT_RUN_CONFIG {} -->\nThe answer.\n<!-- AGENT_RUN_CONFIG {"task": "x"} -->\n<!-- AGENT_RUN_CONFIG oops\n';
    const out = appendSentinelOnce(body, callContext);
    expect(out).toBe(`The answer.\n${renderSentinel(callContext)}`);
    expect(parseSentinel(out)).toEqual({ kind: 'config', config: callContext });
  });

  it('is idempotent: appendOnce(appendOnce(b, c), c) === appendOnce(b, c)', () => {
    const body = 'x\r\n<!-- AGENT_RUN_CONFIG {"task":"a"} -->\r\ny  \r\n\r\n';
    const once = appendSentinelOnce(body, advance);
    expect(appendSentinelOnce(once, advance)).toBe(once);
    expect(once).toBe(`x\r\ny\r\n${renderSentinel(advance)}`);
  });

  it('replaces a previous decision rather than adding a second one', () => {
    const once = appendSentinelOnce('report', advance);
    const twice = appendSentinelOnce(once, callContext);
    expect(countMarkers(twice)).toBe(1);
    expect(parseSentinel(twice)).toEqual({ kind: 'config', config: callContext });
  });

  it('leaves fenced sentinels in place and closes an unclosed fence so the new sentinel is a decision', () => {
    const body = 'Example:\n```\n<!-- AGENT_RUN_CONFIG {} -->';
    const out = appendSentinelOnce(body, advance);
    expect(out).toBe(`Example:\n\`\`\`\n<!-- AGENT_RUN_CONFIG {} -->\n\`\`\`\n${renderSentinel(advance)}`);
    expect(parseSentinel(out)).toEqual({ kind: 'config', config: advance });
    expect(appendSentinelOnce(out, advance)).toBe(out);
  });

  it('throws SentinelError for an invalid config', () => {
    expect(() => appendSentinelOnce('body', { task: 'a', function_call: { function: 'call_agent', agent_name: 'b' } })).toThrow(SentinelError);
  });
});

/** `<!-- AGENT_` + inner + `RUN_CONFIG {} -->`, depth times around one plain sentinel. */
function nestedMarkers(depth: number): string {
  return `${'<!-- AGENT_'.repeat(depth)}<!-- AGENT_RUN_CONFIG {} -->${'RUN_CONFIG {} -->'.repeat(depth)}`;
}

describe('linear time on hostile bodies of Limits.maxBodyChars', () => {
  const size = Limits.maxBodyChars;
  const cases: Array<[string, string]> = [
    ['many unterminated markers on one line', '<!--AGENT_RUN_CONFIG{"'.repeat(size / 22)],
    ['many markers with JSON-looking strings', '<!-- AGENT_RUN_CONFIG {"a":"-->'.repeat(size / 31)],
    ['markers nested so that every removal joins a new one', nestedMarkers(Math.floor(size / 30))],
    ['long runs of spaces after <!--', `<!--${' '.repeat(size)}x`],
    ['deep brackets', `<!-- AGENT_RUN_CONFIG ${'['.repeat(size - 40)} -->`],
    ['many fences', '```\n~~~\n'.repeat(size / 8)],
  ];

  // A hang guard on CPU time (a quadratic walk over these inputs costs tens of seconds), not a
  // speed claim: speed is measured by `npm run bench`.
  it.each(cases)('%s: parse, strip and append finish without a quadratic blow-up', (_name, body) => {
    const started = process.cpuUsage();
    const parsed = parseSentinel(body);
    const appended = appendSentinelOnce(body, advance);
    expect(['config', 'absent', 'invalid']).toContain(parsed.kind);
    expect(parseSentinel(appended)).toEqual({ kind: 'config', config: advance });
    const used = process.cpuUsage(started);
    expect((used.user + used.system) / 1_000).toBeLessThan(3_000);
  });

  it('nested markers are all found and all removed in one pass', () => {
    expectInvalid(parseSentinel(nestedMarkers(50)), 'multiple', '51');
    expect(stripSentinels(nestedMarkers(50))).toBe('');
  });
});
