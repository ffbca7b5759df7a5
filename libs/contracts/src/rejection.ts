import { z } from 'zod';

/**
 * Why Baton refused an input. Every entry point maps its failures to one of these codes, records
 * the rejection (an event or a dead letter with the original bytes) and keeps serving.
 */
export const RejectionCode = {
  /** The bytes are not UTF-8 (checked before JSON: a body is never decoded with its bad bytes replaced). */
  invalidUtf8: 'invalid_utf8',
  malformedJson: 'malformed_json',
  schemaViolation: 'schema_violation',
  sentinelInvalid: 'sentinel_invalid',
  unknownAgent: 'unknown_agent',
  unknownWorkflow: 'unknown_workflow',
  payloadTooLarge: 'payload_too_large',
  wrongState: 'wrong_state',
  unknownEventType: 'unknown_event_type',
  unsupportedVersion: 'unsupported_version',
  conflict: 'conflict',
  notFound: 'not_found',
  forbidden: 'forbidden',
  stale: 'stale',
  /** The body names another project than its subject (identity comes from the subject). */
  projectMismatch: 'project_mismatch',
  /** The body names another agent or actor than its subject's principal. */
  identityMismatch: 'identity_mismatch',
} as const;
export type RejectionCode = (typeof RejectionCode)[keyof typeof RejectionCode];
export const RejectionCodeSchema = z.enum([
  'invalid_utf8',
  'malformed_json',
  'schema_violation',
  'sentinel_invalid',
  'unknown_agent',
  'unknown_workflow',
  'payload_too_large',
  'wrong_state',
  'unknown_event_type',
  'unsupported_version',
  'conflict',
  'not_found',
  'forbidden',
  'stale',
  'project_mismatch',
  'identity_mismatch',
]);

export const RejectionSchema = z.object({
  code: RejectionCodeSchema,
  message: z.string(),
  /** Dotted paths of the offending fields, when the rejection came from a schema. */
  issues: z.array(z.object({ path: z.string(), message: z.string(), code: z.string().optional() })).default([]),
});
export type Rejection = z.infer<typeof RejectionSchema>;

/** The stable code a check of its own gives a zod issue (e.g. MESH_SELF_HANDOFF, in `params.code`); undefined for zod's own checks. */
export function issueOwnCode(issue: z.core.$ZodIssue): string | undefined {
  const own = issue.code === 'custom' ? (issue.params as { code?: unknown } | undefined)?.code : undefined;
  return typeof own === 'string' ? own : undefined;
}

/**
 * The code a refusal is reported under: its first issue's own code when that check has one (an
 * unbuildable mesh is refused `MESH_SELF_HANDOFF`…, not `schema_violation`), else the rejection's.
 * The router's `publish_definition` and the CLI answer with it, so a client sees one code.
 */
export function leadingCode(rejection: Rejection): string {
  return rejection.issues[0]?.code ?? rejection.code;
}

/** Turn a zod error into a rejection that names each offending field. */
export function rejectionFromZod(error: z.ZodError, code: RejectionCode = RejectionCode.schemaViolation): Rejection {
  const issues = error.issues.slice(0, 20).map((issue) => {
    const own = issueOwnCode(issue);
    return { path: issue.path.map(String).join('.') || '(root)', message: issue.message, ...(own !== undefined ? { code: own } : {}) };
  });
  const first = issues[0];
  return {
    code,
    message: first ? `${first.path}: ${first.message}` : 'invalid input',
    issues,
  };
}

/** The result of decoding untrusted input: a value, or a typed rejection. */
export type Decoded<T> = { ok: true; value: T } | { ok: false; rejection: Rejection };

/** Measure a UTF-8 string without allocating a buffer. */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) bytes += 1;
    else if (code < 0x800) bytes += 2;
    else if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length) {
      bytes += 4;
      i++;
    } else bytes += 3;
  }
  return bytes;
}

/** Strict UTF-8: a byte sequence that is not UTF-8 throws instead of becoming U+FFFD. */
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Decode untrusted bytes as UTF-8 text, strictly: bytes that are not UTF-8 (a stray 0xFF, a cut
 * multi-byte sequence, an encoded surrogate, an overlong form) are refused with `invalid_utf8`
 * rather than replaced by U+FFFD, so nothing downstream reads text the sender never wrote.
 */
export function decodeUtf8(bytes: Uint8Array): Decoded<string> {
  try {
    return { ok: true, value: strictUtf8.decode(bytes) };
  } catch {
    return {
      ok: false,
      rejection: { code: RejectionCode.invalidUtf8, message: `the ${bytes.length} bytes are not UTF-8 text${firstBadByte(bytes)}`, issues: [] },
    };
  }
}

/** ` (the first bad byte is at offset N)` for the message. */
function firstBadByte(bytes: Uint8Array): string {
  const at = firstInvalidUtf8Offset(bytes);
  return at < 0 ? '' : ` (the first bad byte is at offset ${at})`;
}

/**
 * The offset of the first byte that breaks UTF-8 (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF; a sequence cut short at the end counts at its first byte), or -1.
 */
export function firstInvalidUtf8Offset(bytes: Uint8Array): number {
  const cont = (i: number, lo = 0x80, hi = 0xbf) => i < bytes.length && bytes[i]! >= lo && bytes[i]! <= hi;
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i]!;
    if (b < 0x80) {
      i += 1;
      continue;
    }
    let n = 0;
    if (b >= 0xc2 && b <= 0xdf) n = cont(i + 1) ? 2 : 0;
    else if (b === 0xe0) n = cont(i + 1, 0xa0) && cont(i + 2) ? 3 : 0;
    else if ((b >= 0xe1 && b <= 0xec) || b === 0xee || b === 0xef) n = cont(i + 1) && cont(i + 2) ? 3 : 0;
    else if (b === 0xed) n = cont(i + 1, 0x80, 0x9f) && cont(i + 2) ? 3 : 0;
    else if (b === 0xf0) n = cont(i + 1, 0x90) && cont(i + 2) && cont(i + 3) ? 4 : 0;
    else if (b >= 0xf1 && b <= 0xf3) n = cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
    else if (b === 0xf4) n = cont(i + 1, 0x80, 0x8f) && cont(i + 2) && cont(i + 3) ? 4 : 0;
    if (n === 0) return i;
    i += n;
  }
  return -1;
}

/**
 * Parse untrusted bytes as JSON: the size cap on the bytes (`payload_too_large`), strict UTF-8
 * (`invalid_utf8`), then {@link parseUntrustedJson}.
 */
export function parseUntrustedJsonBytes(bytes: Uint8Array, maxBytes: number, maxDepth = MAX_JSON_DEPTH): Decoded<unknown> {
  if (bytes.length > maxBytes) {
    return { ok: false, rejection: { code: 'payload_too_large', message: `payload is ${bytes.length} bytes; the cap is ${maxBytes}`, issues: [] } };
  }
  const text = decodeUtf8(bytes);
  return text.ok ? parseCheckedJson(text.value, maxDepth) : text;
}

/**
 * Parse JSON text from an untrusted source: size-capped, and with `__proto__` / `constructor` /
 * `prototype` keys rejected so a decoded object can never pollute a prototype.
 */
export function parseUntrustedJson(text: string, maxBytes: number, maxDepth = MAX_JSON_DEPTH): Decoded<unknown> {
  const size = utf8Length(text);
  if (size > maxBytes) {
    return {
      ok: false,
      rejection: { code: 'payload_too_large', message: `payload is ${size} bytes; the cap is ${maxBytes}`, issues: [] },
    };
  }
  return parseCheckedJson(text, maxDepth);
}

/**
 * Text that may hold one of the forbidden keys: the key itself, or a `\u` escape (the only other
 * way JSON can spell its letters). Text without any of them is parsed without a reviver, which
 * costs JSON.parse four times its own time (one call per key and value).
 */
const MAYBE_FORBIDDEN_KEY = /__proto__|constructor|prototype|\\u/;

/** {@link parseUntrustedJson} after the size check: the nesting cap, the forbidden keys, the parse. */
function parseCheckedJson(text: string, maxDepth: number): Decoded<unknown> {
  const depth = nestingDepth(text, maxDepth);
  if (depth > maxDepth) {
    return {
      ok: false,
      rejection: { code: 'schema_violation', message: `the document nests ${depth} levels deep; the cap is ${maxDepth}`, issues: [] },
    };
  }
  let forbiddenKey: string | null = null;
  let loneSurrogate: string | null = null;
  let value: unknown;
  try {
    // A lone surrogate can only come from a `\u` escape (the bytes were UTF-8): checked on this path.
    value = MAYBE_FORBIDDEN_KEY.test(text)
      ? JSON.parse(text, (key, v) => {
          if (key === '__proto__' || key === 'constructor' || key === 'prototype') forbiddenKey = key;
          if (loneSurrogate === null) {
            const lone = LONE_SURROGATE.exec(key) ?? (typeof v === 'string' ? LONE_SURROGATE.exec(v) : null);
            if (lone !== null) loneSurrogate = lone[0];
          }
          return v;
        })
      : JSON.parse(text);
  } catch (error) {
    return {
      ok: false,
      rejection: { code: 'malformed_json', message: `not valid JSON: ${(error as Error).message}`, issues: [] },
    };
  }
  if (forbiddenKey !== null) {
    return {
      ok: false,
      rejection: { code: 'schema_violation', message: `the key "${forbiddenKey}" is not allowed`, issues: [] },
    };
  }
  if (loneSurrogate !== null) {
    const unit = `\\u${(loneSurrogate as string).charCodeAt(0).toString(16)}`;
    return {
      ok: false,
      rejection: { code: 'invalid_utf8', message: `a \\u escape names a lone surrogate (${unit}): no character, and no UTF-8 text can hold it`, issues: [] },
    };
  }
  return { ok: true, value };
}

/** Half of a surrogate pair without its other half. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Deepest nesting of arrays and objects an untrusted document may have. */
export const MAX_JSON_DEPTH = 64;

/**
 * How much deeper than an inbox message a service's own ledger command may nest: the router puts a
 * run's variables (at most {@link MAX_JSON_DEPTH} deep in the start or result that brought them)
 * inside a `create`'s `context`, and a `complete_then_create` wraps that create once more.
 */
export const SERVICE_COMMAND_EXTRA_DEPTH = 4;

/**
 * The deepest `{` / `[` nesting in JSON text, ignoring brackets inside strings. Linear, no
 * recursion. Text with at most `cap` brackets cannot nest deeper than that: for it
 * the brackets are only counted (a native search) and the count is returned, an upper bound.
 */
function nestingDepth(text: string, cap: number): number {
  let brackets = 0;
  for (const open of ['{', '[']) {
    for (let at = text.indexOf(open); at >= 0 && brackets <= cap; at = text.indexOf(open, at + 1)) brackets++;
  }
  if (brackets <= cap) return brackets;
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth > deepest) deepest = depth;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return deepest;
}
