import { z } from 'zod';

/** Hard caps applied at every entry point. A value over a cap is rejected, never truncated. */
export const Limits = {
  /** Largest message Baton accepts on any subject or HTTP body, in bytes. */
  maxMessageBytes: 256 * 1024,
  /** Largest AGENT_RUN_CONFIG sentinel JSON payload, in bytes. */
  maxSentinelBytes: 8 * 1024,
  /** Largest agent-authored body text, in characters. */
  maxBodyChars: 128 * 1024,
  /** What a run keeps of an agent's posted body per turn (`run.result_recorded.posted_body`). */
  maxPostedBodyChars: 16 * 1024,
  /** Longest identifier (ids, agent names, projects). */
  maxIdLength: 128,
  /** Longest short free text (summaries, reasons, user messages). */
  maxShortText: 4_000,
  /** Most entries in a list field (tried, artifacts, files_changed...). */
  maxListItems: 500,
} as const;

/**
 * `text` cut to at most `max` characters (a short text by default), its last one `…` when cut: for
 * text Baton writes itself from longer text (reasons, summaries, excerpts), never for input, which
 * is refused over its cap. Characters are counted as the caps count them (code points: an emoji is
 * one), and a cut never splits one.
 */
export function clipText(text: string, max: number = Limits.maxShortText): string {
  // At most `max` UTF-16 units is at most `max` characters: no count needed.
  if (text.length <= max) return text;
  return codePointLength(text) <= max ? text : `${codePointPrefix(text, max - 1)}…`;
}

/** How many characters (code points) `text` has: what Baton's length caps and clips count. */
export function codePointLength(text: string): number {
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
    count++;
  }
  return count;
}

/** The first `count` characters (code points) of `text`, never half of one. */
export function codePointPrefix(text: string, count: number): string {
  let i = 0;
  for (let taken = 0; taken < count && i < text.length; taken++) {
    const c = text.charCodeAt(i);
    const pair = c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && text.charCodeAt(i + 1) >= 0xdc00 && text.charCodeAt(i + 1) <= 0xdfff;
    i += pair ? 2 : 1;
  }
  return text.slice(0, i);
}

/**
 * Names Baton refuses everywhere a name is written — agents, steps, variables, and the keys of
 * records keyed by names: `__proto__` sets an object's prototype when assigned (and zod drops it
 * from a record without a word), and all three are the keys the message edge refuses at any
 * depth of a body (`parseUntrustedJson`), so a name that is one could never be sent back.
 */
export const RESERVED_NAMES = ['__proto__', 'constructor', 'prototype'] as const;

/** The message of every refusal of a {@link RESERVED_NAMES} name. */
export const RESERVED_NAME_MESSAGE = '"__proto__", "constructor" and "prototype" are reserved and cannot be used as names';

/**
 * A name pattern's first part: at the start of a name, a lookahead that refuses exactly one of
 * {@link RESERVED_NAMES} (so the JSON Schemas state the rule as part of the name's pattern).
 */
const NOT_RESERVED = `^(?!(?:${RESERVED_NAMES.join('|')})$)`;

/** A name pattern: `chars` (a regex source for the whole name) for any name but a reserved one. */
export function namePattern(chars: string): RegExp {
  return new RegExp(`${NOT_RESERVED}${chars}$`);
}

/** A record key: any string but one of {@link RESERVED_NAMES}. */
export const RecordKeySchema = z.string().regex(new RegExp(NOT_RESERVED), RESERVED_NAME_MESSAGE);

/**
 * A JSON object keyed by names, that refuses a {@link RESERVED_NAMES} key with an issue at its
 * path. `__proto__` needs this check before zod's record, which would leave that key out of the
 * parsed value without a word (a `JSON.parse`d body holds it as an own member). `key` must refuse
 * the names itself ({@link RecordKeySchema}, or a name schema of this package), so that the JSON
 * Schema states the rule too (as `propertyNames`).
 */
export function namedRecord<K extends z.ZodType<string, string>, V extends z.ZodType>(key: K, value: V) {
  const record = z.record(key, value);
  return z.preprocess((input: z.input<typeof record>, ctx) => {
    if (typeof input !== 'object' || input === null) return input;
    for (const name of RESERVED_NAMES) {
      if (Object.hasOwn(input, name)) ctx.addIssue({ code: 'custom', message: RESERVED_NAME_MESSAGE, path: [name], input });
    }
    return input;
  }, record);
}

/** An identifier: printable, no whitespace, no subject wildcards or separators. */
export const IdSchema = z
  .string()
  .min(1)
  .max(Limits.maxIdLength)
  .regex(/^[A-Za-z0-9_\-:@]+$/, 'ids may hold letters, digits and _ - : @ only');

/** A project key. It becomes a NATS subject token, so it is stricter than an id. */
export const ProjectIdSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[a-z0-9][a-z0-9_-]*$/, 'project keys are lowercase letters, digits, _ and -');

/**
 * An agent name as written in definitions and sentinels. It becomes a NATS subject token (results
 * and offers are addressed per agent), so it may not hold dots, spaces or wildcards.
 */
export const AgentNameSchema = tokenNameSchema('agent');

/** A mesh's name: the rules of an agent name, said of a mesh. */
export const MeshNameSchema = tokenNameSchema('mesh');

/** A name with an agent name's rules (letters, digits, `_` and `-`; not a reserved name), its refusal naming what it names. */
export function tokenNameSchema(what: 'agent' | 'mesh' | 'step' | 'workflow') {
  return z
    .string()
    .min(1)
    .max(Limits.maxIdLength)
    .regex(namePattern('[A-Za-z0-9_-]+'), `${what} names may hold letters, digits, _ and - only; ${RESERVED_NAME_MESSAGE}`);
}

export const IsoTimeSchema = z.iso.datetime({ offset: true });

export const ShortTextSchema = z.string().max(Limits.maxShortText);
/**
 * Somewhere a character that is not white space: a text this pattern does not match is blank. White
 * space is what `String.prototype.trim` removes (and ECMAScript's `\s` matches): tab, line feed,
 * vertical tab, form feed, carriage return, the Unicode space separators (U+0020, U+00A0, U+1680,
 * U+2000–U+200A, U+202F, U+205F, U+3000), U+2028, U+2029 and U+FEFF. An invisible format character
 * (a zero-width space U+200B, a bidi mark) is not white space, so it is not blank here (the operator
 * API's {@link nonBlankPersonTextSchema} refuses it too). Written code point by code point, not as
 * `\S`, so the JSON Schemas' `pattern` means the same in a regex dialect whose `\s` is another set
 * (Python's, Java's).
 */
// eslint-disable-next-line no-control-regex -- tab to carriage return are white space, named by code point
export const NOT_BLANK = /[^\u0009-\u000d\u0020\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]/;

/**
 * A short text that says something (a reason, a summary): trimmed, and refused as blank when it is
 * white space alone ({@link NOT_BLANK}, which the JSON Schemas carry as their `pattern`).
 */
export const NonBlankShortTextSchema = ShortTextSchema.trim().regex(NOT_BLANK, 'must not be blank');

/** A text without control characters but tab, line feed and carriage return (no C0 control, DEL or C1 control). */
// eslint-disable-next-line no-control-regex -- finding control characters is what it is for
const NO_CONTROLS = /^[^\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]*$/;
/**
 * Somewhere a character a reader sees: not white space, not a control, not a format character (a
 * bidi mark, a zero-width space). Its `source` is the JSON Schemas' `pattern` for such a text (a
 * Unicode property escape: ECMA-262 with the `u` flag, as JSON Schema's regexes are).
 */
export const SOMETHING_VISIBLE = /[^\s\p{Cc}\p{Cf}]/u;

/**
 * Free text a person types at Baton's edge (an operator's note): at most {@link Limits.maxShortText}
 * characters, and no control characters but tab and line breaks — a NUL or an escape sequence is
 * not text, and would reach every reader of the event (terminals, logs, webhooks).
 */
export const PersonTextSchema = ShortTextSchema.regex(NO_CONTROLS, 'control characters are not text (tab and line breaks are the only ones taken)');

/**
 * A person's text that says something (a reason): {@link PersonTextSchema}, trimmed, and refused as
 * blank (`blank`: the refusal's words) when nothing in it is visible — spaces, controls and invisible
 * format characters alone.
 */
export function nonBlankPersonTextSchema(blank = 'must not be blank') {
  return PersonTextSchema.trim().regex(SOMETHING_VISIBLE, `${blank} (nothing in it is visible)`);
}

/** Whether `text` has a character a reader sees (see {@link nonBlankPersonTextSchema}). */
export function hasVisibleText(text: string): boolean {
  return SOMETHING_VISIBLE.test(text);
}

export type Id = z.infer<typeof IdSchema>;
export type ProjectId = z.infer<typeof ProjectIdSchema>;
export type AgentName = z.infer<typeof AgentNameSchema>;

/**
 * The digest of the wire command body an outside caller (an agent, an operator, a person) sent
 * with its idempotency key: 32 lowercase hex digits (the first 128 bits of SHA-256 over the body's
 * keys sorted at every level, identity claims left out). A later command with the same key, command
 * and actor is a retry only with the same digest; another body is refused `idempotency_key_reused`
 * (docs/handoffs.md rule 13; the kill switch's pause and resume alike). Absent on the services' own commands and on events stored before it.
 */
export const CommandDigestSchema = z.string().regex(/^[0-9a-f]{32}$/, 'a command digest is 32 lowercase hex digits');
