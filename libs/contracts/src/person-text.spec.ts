import { hasVisibleText, nonBlankPersonTextSchema, PersonTextSchema } from './common';

describe("a person's text at Baton's edge (an operator's note or reason)", () => {
  it('takes any text with tab and line breaks, in any script, bidi marks included', () => {
    for (const text of ['refund approved', 'line one\nline two\r\n\ttabbed', 'مرحبا \u202bbidi\u202c', '', '名前']) {
      expect(PersonTextSchema.safeParse(text).success).toBe(true);
    }
  });

  it('refuses control characters other than tab and line breaks: C0, DEL and C1', () => {
    for (const text of ['a\u0000b', '\u0001', 'esc \u001b[31m red', 'del\u007f', 'c1\u0085', 'c1\u009b2J']) {
      const parsed = PersonTextSchema.safeParse(text);
      expect(parsed.success).toBe(false);
      expect(parsed.error?.issues[0]?.message).toContain('control characters are not text');
    }
  });

  it('a reason must show something: spaces, controls and invisible format characters alone are blank, with the words the caller gives', () => {
    const reason = nonBlankPersonTextSchema('an abandon says why');
    for (const blank of ['', '   ', '\n\t', '\u200b\u200d', '\u202e', ' \u2060 ']) {
      const parsed = reason.safeParse(blank);
      expect(parsed.success).toBe(false);
      expect(parsed.error?.issues.map((i) => i.message)).toContain('an abandon says why (nothing in it is visible)');
    }
    expect(reason.safeParse('\u0000\u0001').success).toBe(false);
    expect(reason.parse('  duplicate work  ')).toBe('duplicate work');
    expect(hasVisibleText('\u200b x')).toBe(true);
    expect(hasVisibleText('\u200b \u202e')).toBe(false);
  });
});
