import { z } from 'zod';

/**
 * Why Baton refused an input. Every entry point maps its failures to one of these codes, records
 * the rejection (an event or a dead letter with the original bytes) and keeps serving.
 */
export const RejectionCode = {
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
} as const;
export type RejectionCode = (typeof RejectionCode)[keyof typeof RejectionCode];
export const RejectionCodeSchema = z.enum([
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
]);

export const RejectionSchema = z.object({
  code: RejectionCodeSchema,
  message: z.string(),
  /** Dotted paths of the offending fields, when the rejection came from a schema. */
  issues: z.array(z.object({ path: z.string(), message: z.string(), code: z.string().optional() })).default([]),
});
export type Rejection = z.infer<typeof RejectionSchema>;

/** Turn a zod error into a rejection that names each offending field. */
export function rejectionFromZod(error: z.ZodError, code: RejectionCode = RejectionCode.schemaViolation): Rejection {
  const issues = error.issues.slice(0, 20).map((issue) => {
    // A check with a stable code of its own (e.g. MESH_SELF_HANDOFF) names it in `params.code`.
    const own = issue.code === 'custom' ? (issue.params as { code?: unknown } | undefined)?.code : undefined;
    return { path: issue.path.map(String).join('.') || '(root)', message: issue.message, ...(typeof own === 'string' ? { code: own } : {}) };
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

/**
 * Parse JSON text from an untrusted source: size-capped, and with `__proto__` / `constructor` /
 * `prototype` keys rejected so a decoded object can never pollute a prototype.
 */
export function parseUntrustedJson(text: string, maxBytes: number): Decoded<unknown> {
  const size = utf8Length(text);
  if (size > maxBytes) {
    return {
      ok: false,
      rejection: { code: 'payload_too_large', message: `payload is ${size} bytes; the cap is ${maxBytes}`, issues: [] },
    };
  }
  const depth = nestingDepth(text);
  if (depth > MAX_JSON_DEPTH) {
    return {
      ok: false,
      rejection: { code: 'schema_violation', message: `the document nests ${depth} levels deep; the cap is ${MAX_JSON_DEPTH}`, issues: [] },
    };
  }
  let forbiddenKey: string | null = null;
  let value: unknown;
  try {
    value = JSON.parse(text, (key, v) => {
      if (key === '__proto__' || key === 'constructor' || key === 'prototype') forbiddenKey = key;
      return v;
    });
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
  return { ok: true, value };
}

/** Deepest nesting of arrays and objects an untrusted document may have. */
export const MAX_JSON_DEPTH = 64;

/** The deepest `{` / `[` nesting in JSON text, ignoring brackets inside strings. Linear, no recursion. */
function nestingDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth > deepest) deepest = depth;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return deepest;
}
