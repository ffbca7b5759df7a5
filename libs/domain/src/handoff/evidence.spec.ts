import fc from 'fast-check';
import { applyEvidenceFloor, evidenceFloorApplies, hasEvidence, isMeaningfulEntry, isMeaningfulText } from './evidence';
import { report } from './handoff.fixtures';

describe('evidence floor: what counts as evidence', () => {
  it('a named test run, a described artifact or a real work product id is evidence', () => {
    expect(hasEvidence({ tests_run: [{ name: 'parser.spec.ts', passed: 12 }] })).toBe(true);
    expect(hasEvidence({ artifacts: [{ path: ' ', url: 'https://ci/build/7' }] })).toBe(true);
    expect(hasEvidence({ work_product_id: 'pr-42' })).toBe(true);
    expect(hasEvidence({ tests_run: ['', 'npm test: 40 passed'] })).toBe(true);
    // Read against the placeholders by skeleton, not trimmed away: an id that contains one, or text in another script.
    expect(hasEvidence({ work_product_id: 'NA-123' })).toBe(true);
    expect(hasEvidence({ tests_run: ['тесты: 12 пройдено'] })).toBe(true);
  });

  it('empty or placeholder entries are not evidence, however they are nested', () => {
    expect(hasEvidence(undefined)).toBe(false);
    expect(hasEvidence({ tests_run: [], artifacts: [] })).toBe(false);
    expect(isMeaningfulEntry([[{ a: [' n/a ', { b: 'TBD' }] }]])).toBe(false);
    expect(isMeaningfulEntry({ a: { b: { c: { d: { e: { f: { g: { h: 'deep' } } } } } } } })).toBe(false);
  });

  /** Seed 002's known hole `[{}]` and its cousins: invisible characters, JSON-encoded emptiness, punctuated placeholders. */
  const notEvidence: Array<[string, unknown]> = [
    ['n-a, spelled with a hyphen', 'n-a'],
    ['N A, spelled with a space', 'N A'],
    ['t.b.d. with inner dots', 't.b.d.'],
    ['not_applicable with an underscore', 'not_applicable'],
    ['none with a Cyrillic o', 'n\u043ene'],
    ['TODO with a Greek omicron', 'T\u039fD\u039f'],
    ['a zero-width space', '\u200b'],
    ['a word joiner', '\u2060'],
    ['a BOM and a soft hyphen', '\ufeff\u00ad'],
    ['a Hangul filler', '\u3164'],
    ['a braille blank', '\u2800'],
    ['an object named with zero-width spaces', { name: '\u200b\u200b' }],
    ['JSON text [{}]', '[{}]'],
    ['JSON text [ ]', '[ ]'],
    ['JSON text { }', '{ }'],
    ['JSON text [""]', '[""]'],
    ['JSON text [null]', '[null]'],
    ['JSON text [42]', '[42]'],
    ['JSON text {"name":"n/a"}', '{"name":"n/a"}'],
    ['a JSON empty string', '""'],
    ['a JSON string holding a zero-width space', '"\\u200b"'],
    ['JSON text nested in JSON text', JSON.stringify(JSON.stringify([{}]))],
    ['a lone dot', '.'],
    ['N/A.', 'N/A.'],
    ['none.', 'none.'],
    ['(TBD)', '(TBD)'],
    ['a placeholder split by a zero-width space', 'n\u200b/a'],
    ['a placeholder across a newline', 'not\napplicable'],
    ['punctuation only', '-- ... ?!'],
    ['a full-width N/A', '\uff2e/\uff21'],
    ['a full-width NONE', '\uff2e\uff2f\uff2e\uff25'],
    ['full-width TBD', '\uff34\uff22\uff24'],
    ['circled N/A', '\u24c3/\u24b6'],
    ['full-width JSON text [{}]', '\uff3b\uff5b\uff5d\uff3d'],
    ['NONE in Latin small capitals', '\u0274\u1d0f\u0274\u1d07'],
    ['nil with a combining acute (NFKC composes it)', 'nil\u0301'],
    ['none with a combining acute', 'no\u0301ne'],
    ['NONE with precomposed accents', '\u0143\u00d3\u0143\u00c9'],
    ['n/a twice', 'n/a n/a'],
    ['none twice with a comma', 'none, none'],
    ['a list of different placeholders', 'not applicable; TBD | n/a'],
  ];

  it.each(notEvidence)('hole (b): %s is not evidence, in tests_run, artifacts or work_product_id', (_name, entry) => {
    expect(hasEvidence({ tests_run: [entry] })).toBe(false);
    expect(hasEvidence({ artifacts: [entry] })).toBe(false);
    if (typeof entry === 'string') expect(hasEvidence({ work_product_id: entry })).toBe(false);
  });

  const evidence: Array<[string, unknown]> = [
    ['a test count', '3 passed'],
    ['a short ok', 'ok'],
    ['a CI url', 'https://ci/run/1'],
    ['a file path', 'libs/domain/src/handoff/evidence.ts'],
    ['a PR number', '42'],
    ['a sentence ending in a dot', 'All 12 tests passed.'],
    ['a word that contains a placeholder', 'none failed'],
    ['non-Latin text', '测试通过'],
    ['real text wrapped in zero-width spaces', '\u200bpr-42\u200b'],
    ['JSON text with a named test', '[{"name":"parser.spec.ts"}]'],
    ['a JSON string', '"pr-42"'],
    ['bracketed text that is not JSON', '[x] smoke test'],
    ['full-width text that says something', '\uff30\uff32-42'],
    ['a list with one real entry among placeholders', 'n/a, n/a, parser.spec.ts'],
    ['accented text that is not a placeholder', 'café tests: 3 passed'],
    ['small capitals that say something', '\u1d18\u0280-42'],
  ];

  it.each(evidence)('genuine evidence still counts: %s', (_name, entry) => {
    expect(hasEvidence({ tests_run: [entry] })).toBe(true);
    expect(hasEvidence({ artifacts: [entry] })).toBe(true);
    if (typeof entry === 'string') expect(hasEvidence({ work_product_id: entry })).toBe(true);
  });

  const invisible = fc.constantFrom('\u200b', '\u200c', '\u200d', '\u2060', '\ufeff', '\u00ad', '\u180e', '\u3164', '\u2800', ' ', '\t', '\n', '\u00a0');
  const noise = fc.array(invisible, { maxLength: 4 }).map((chars) => chars.join(''));
  const punctuation = fc.array(fc.constantFrom('.', '"', '(', ')', '*', '-', '!', '`'), { maxLength: 3 }).map((chars) => chars.join(''));
  /** Empty JSON values, and JSON texts encoding them (up to twice). */
  const emptyJson = fc.constantFrom<unknown>(null, '', [], {}, [{}], [''], [null], { name: '' }, [[]]);
  const encoded = (value: fc.Arbitrary<unknown>) =>
    fc.tuple(value, fc.nat(2)).map(([v, times]) => Array.from({ length: times }, () => 0).reduce<unknown>((acc) => JSON.stringify(acc), v));

  it('property: invisible characters, surrounding punctuation and JSON encoding never turn emptiness or a placeholder into evidence', () => {
    const placeholder = fc.constantFrom('n/a', 'N/A', 'none', 'None', 'TBD', 'todo', 'null', 'nothing', 'not applicable', '');
    const text = fc.tuple(noise, punctuation, placeholder, punctuation, noise).map((parts) => parts.join(''));
    fc.assert(
      fc.property(fc.oneof(text, encoded(emptyJson), encoded(fc.array(text, { maxLength: 3 }))), (entry) => {
        expect(hasEvidence({ tests_run: [entry] })).toBe(false);
        if (typeof entry === 'string') expect(isMeaningfulText(entry)).toBe(false);
      }),
    );
  });

  it('property: genuine evidence keeps counting when padded with invisible characters or JSON-encoded', () => {
    const genuine = fc.constantFrom('3 passed', 'ok', 'https://ci/run/1', 'apps/router/src/main.ts', 'pr-42', '42', 'npm test: 40 passed');
    fc.assert(
      fc.property(fc.tuple(noise, genuine, noise), fc.nat(2), ([before, text, after], times) => {
        const entry = Array.from({ length: times }, () => 0).reduce<string>((acc) => JSON.stringify(acc), before + text + after);
        expect(hasEvidence({ tests_run: [entry] })).toBe(true);
        expect(hasEvidence({ work_product_id: entry })).toBe(true);
      }),
    );
  });

  it('applicability depends only on the platform-attached actor kind: operators and humans are untouched', () => {
    expect((['agent', 'watchdog', 'system', 'operator', 'human'] as const).map((k) => evidenceFloorApplies(k))).toEqual([true, true, true, false, false]);
  });

  it('the floor copies the report and never mutates the caller`s', () => {
    const original = report({ evidence: { tests_run: [{}] } });
    const floored = applyEvidenceFloor(original, 'agent');
    expect(floored.report.outcome).toBe('partial');
    expect(original.outcome).toBe('completed');
  });
});
