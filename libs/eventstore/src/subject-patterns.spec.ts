import { patternWithin, subjectMatches } from './subject-patterns';

describe('pattern containment (patternWithin)', () => {
  it('a pattern lies within another exactly when every subject it matches, the other matches too', () => {
    const cases: Array<[string, string, boolean]> = [
      ['b.ev.>', 'b.ev.>', true],
      ['b.ev.>', 'b.ev.*.handoff.*', true],
      ['b.ev.>', 'b.ev.p.handoff.h1', true],
      ['b.ev.*.handoff.*', 'b.ev.p.handoff.*', true],
      ['b.ev.*.handoff.*', 'b.ev.*.handoff.*', true],
      ['b.ev.*.handoff.*', 'b.ev.>', false],
      ['b.ev.*.handoff.*', 'b.ev.*.run.*', false],
      ['b.ev.*.handoff.*', 'b.ev.*.handoff.>', false],
      ['b.ev.*.handoff.*', 'b.ev.*.handoff', false],
      ['b.ev.>', 'b.ev', false],
      ['b.ev.p.*', 'b.ev.*.x', false],
    ];
    for (const [outer, inner, expected] of cases) expect({ outer, inner, within: patternWithin(outer, inner) }).toEqual({ outer, inner, within: expected });
    // Checked against matching: a subject the inner pattern matches is matched by the outer one.
    for (const [outer, inner, expected] of cases) {
      if (!expected || inner.includes('*') || inner.includes('>')) continue;
      expect(subjectMatches(outer, inner)).toBe(true);
    }
  });
});
