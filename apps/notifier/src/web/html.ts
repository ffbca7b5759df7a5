/**
 * HTML built by a tagged template that escapes every interpolated value unless it is already
 * {@link SafeHtml}. Agent-produced text (user messages, summaries, tool names and arguments,
 * reasons) is only ever interpolated, so it always reaches the page as text, never as markup.
 */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;', '=': '&#61;' };

/**
 * The bidirectional embedding, override and isolate controls (U+202A–U+202E, U+2066–U+2069): in
 * agent text they make what a person reads differ from what it holds — a frozen call's argument
 * shown reversed from the value an approval runs. Shown as what they are, `[U+202E]`, never obeyed.
 */
const BIDI_CONTROLS = /[\u202A-\u202E\u2066-\u2069]/g;

/** Escape text for HTML element content and quoted attribute values (bidi controls made visible). */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`=]/g, (c) => ESCAPES[c] as string).replace(BIDI_CONTROLS, (c) => `[U+${c.charCodeAt(0).toString(16).toUpperCase()}]`);
}

/** Interpolatable values: text (escaped), numbers, SafeHtml (as is), lists of them; null/undefined/false render nothing. */
export type HtmlValue = string | number | SafeHtml | null | undefined | false | readonly HtmlValue[];

function render(value: HtmlValue): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof SafeHtml) return value.value;
  if (Array.isArray(value)) return value.map((v: HtmlValue) => render(v)).join('');
  return escapeHtml(String(value));
}

/** The tagged template: `html\`<p>${text}</p>\`` escapes `text`. */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): SafeHtml {
  let out = strings[0] ?? '';
  values.forEach((value, i) => {
    out += render(value) + (strings[i + 1] ?? '');
  });
  return new SafeHtml(out);
}

/** Trusted markup (constants written in this folder only — never agent text). */
export function trusted(markup: string): SafeHtml {
  return new SafeHtml(markup);
}

/** A path segment, percent-encoded (then escaped when interpolated into an attribute). */
export const seg = (value: string) => encodeURIComponent(value);

/** Pretty JSON for display inside <pre> (escaped when interpolated). */
export function prettyJson(value: unknown): string {
  try {
    return JSON.stringify(value, null, 2) ?? 'null';
  } catch {
    return String(value);
  }
}
