import fc from 'fast-check';
import { clipText, codePointLength, codePointPrefix } from './common';

/** Clips count characters as the caps do (code points: an emoji is one) and never split one. */
describe('clipText, codePointLength, codePointPrefix', () => {
  it('count an emoji as one character, as the caps do: 4 000 emoji fit a 4 000-character clip whole', () => {
    const emoji = '😀'.repeat(4_000);
    expect(emoji.length).toBe(8_000);
    expect(codePointLength(emoji)).toBe(4_000);
    expect(clipText(emoji, 4_000)).toBe(emoji);
    const cut = clipText(`x${emoji}`, 4_000);
    expect(codePointLength(cut)).toBe(4_000);
    expect(cut).toBe(`x${'😀'.repeat(3_998)}…`);
  });

  it('never leave half a surrogate pair, and keep a lone surrogate as one character', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 60 }), fc.integer({ min: 1, max: 40 }), (text, max) => {
        const cut = clipText(text, max);
        expect(codePointLength(cut)).toBeLessThanOrEqual(Math.max(max, 1));
        if (cut !== text) {
          expect(cut.endsWith('…')).toBe(true);
          const kept = cut.slice(0, -1);
          expect(text.startsWith(kept)).toBe(true);
          // The cut is between two characters: the next one is not the low half of a pair begun in `kept`.
          expect(codePointPrefix(text, codePointLength(kept))).toBe(kept);
        }
      }),
    );
    expect(codePointLength('a\ud800b')).toBe(3);
    expect(codePointPrefix('\ud83d\ude00\ud83d\ude00', 1)).toBe('😀');
  });
});
