import { escapeHtml, html } from './html';

describe('HTML escaping of agent text', () => {
  it('escapes markup characters', () => {
    expect(escapeHtml(`<img src=x onerror="a('b')">&\``)).toBe('&lt;img src&#61;x onerror&#61;&quot;a(&#39;b&#39;)&quot;&gt;&amp;&#96;');
  });

  it('shows bidirectional overrides and isolates as what they are instead of letting them reorder the text (a frozen argument read reversed)', () => {
    const iban = 'DE89\u202E0001 0002\u202C';
    expect(escapeHtml(iban)).toBe('DE89[U+202E]0001 0002[U+202C]');
    expect(html`<code>${'a\u2066b\u2069\u202Ac\u202D'}</code>`.value).toBe('<code>a[U+2066]b[U+2069][U+202A]c[U+202D]</code>');
    // Marks that only nudge direction (LRM, RLM) and right-to-left text itself are left alone.
    expect(escapeHtml('\u200F\u05E9\u05DC\u05D5\u05DD\u200E')).toBe('\u200F\u05E9\u05DC\u05D5\u05DD\u200E');
  });
});
