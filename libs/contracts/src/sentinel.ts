import { z } from 'zod';
import { clipText as clip, Limits } from './common';
import { parseUntrustedJson, utf8Length } from './rejection';
import { AgentRunConfig, AgentRunConfigSchema, DispatchStatus } from './sentinel-schema';

/**
 * The AGENT_RUN_CONFIG sentinel: a one-line HTML comment carrying the compact JSON of an
 * {@link AgentRunConfig}, e.g. `<!-- AGENT_RUN_CONFIG {"dispatch":{"status":"advance"}} -->`.
 *
 * Baton renders it from typed state and appends it to a posted body exactly once
 * ({@link appendSentinelOnce}); {@link parseSentinel} reads it back from legacy or posted bodies.
 *
 * Scanning rules shared by every function here (one linear pass, no backtracking regex):
 * - a marker is `<!--`, optional spaces/tabs, `AGENT_RUN_CONFIG`, not followed by a letter, digit or `_`;
 * - the payload ends at the `-->` that follows a balanced JSON object (so a `-->` inside a JSON
 *   string does not cut it), else at the first `-->` on the marker's line; no `-->` on the line
 *   means the sentinel is unterminated and runs to the end of that line;
 * - lines inside a fenced code block (``` or ~~~, CommonMark rules, an unclosed fence runs to the
 *   end of the body) are quoted text, never decisions: their sentinels are ignored and kept.
 */
export const SENTINEL_KEYWORD = 'AGENT_RUN_CONFIG';

/** Why a sentinel that is present could not be read. Stable codes; the diagnostic says the detail. */
export const SentinelDiagnosticCode = {
  badJson: 'bad_json',
  notObject: 'not_object',
  invariant: 'invariant',
  unknownStatus: 'unknown_status',
  schema: 'schema',
  multiple: 'multiple',
  tooLarge: 'too_large',
  unterminated: 'unterminated',
  forbiddenKey: 'forbidden_key',
} as const;
export type SentinelDiagnosticCode = (typeof SentinelDiagnosticCode)[keyof typeof SentinelDiagnosticCode];
export const SentinelDiagnosticCodeSchema = z.enum([
  'bad_json',
  'not_object',
  'invariant',
  'unknown_status',
  'schema',
  'multiple',
  'too_large',
  'unterminated',
  'forbidden_key',
]);

/** What a body says about its hand-off: a valid config, no sentinel at all, or a broken one. */
export type SentinelParse =
  | { kind: 'config'; config: AgentRunConfig }
  | { kind: 'absent' }
  | { kind: 'invalid'; diagnostic: string; code: SentinelDiagnosticCode };

/**
 * Thrown by {@link renderSentinel} (and so {@link appendSentinelOnce}) when asked to render a config
 * that is not valid. Rendering invalid state is a programmer error, not a business outcome.
 */
export class SentinelError extends Error {
  override readonly name = 'SentinelError';
  constructor(
    readonly code: SentinelDiagnosticCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The seed's invariant wording, used verbatim in diagnostics. */
const AT_LEAST_ONE_ACTION = 'at least one action is required: a sentinel must carry one of task, dispatch or function_call';
const TASK_XOR_FUNCTION_CALL = 'task and function_call are mutually exclusive: they are two ways to name a target';
const MAX_DIAGNOSTIC_CHARS = 400;
const ALLOWED_STATUSES = Object.values(DispatchStatus);

// ---------------------------------------------------------------------------------------------
// Rendering

/**
 * Render a config as exactly one line `<!-- AGENT_RUN_CONFIG {compact json} -->`.
 *
 * Deterministic: keys are written in the order task, dispatch, function_call and, inside each,
 * in schema field order, so equal configs always render to the same bytes. `<`, `>`, U+2028 and
 * U+2029 are written as `\uXXXX` escapes, so no string value can close the comment or break the line.
 *
 * @throws SentinelError when the config fails AgentRunConfigSchema (code `invariant`, `unknown_status`
 *   or `schema`), or when the rendered payload exceeds Limits.maxSentinelBytes (code `too_large`) —
 *   such a sentinel could not be read back.
 */
export function renderSentinel(config: AgentRunConfig): string {
  const checked = validateConfig(config, 'the AGENT_RUN_CONFIG payload');
  if (!checked.ok) throw new SentinelError(checked.code, `cannot render an invalid AGENT_RUN_CONFIG: ${checked.diagnostic}`);
  const payload = escapeForComment(JSON.stringify(orderedConfig(checked.config)));
  const size = utf8Length(payload);
  if (size > Limits.maxSentinelBytes) {
    throw new SentinelError(
      SentinelDiagnosticCode.tooLarge,
      `cannot render AGENT_RUN_CONFIG: the payload is ${size} bytes; the limit is ${Limits.maxSentinelBytes}`,
    );
  }
  return `<!-- ${SENTINEL_KEYWORD} ${payload} -->`;
}

function orderedConfig(config: AgentRunConfig): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (config.task !== undefined) out['task'] = config.task;
  if (config.dispatch !== undefined) {
    const { status, reason, task_hint, workflow, step, origin } = config.dispatch;
    out['dispatch'] = definedOnly({ status, reason, task_hint, workflow, step, origin });
  }
  if (config.function_call !== undefined) {
    const { function: fn, agent_name, callback } = config.function_call;
    out['function_call'] = definedOnly({ function: fn, agent_name, callback });
  }
  return out;
}

function definedOnly(record: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(record)) if (value !== undefined) out[key] = value;
  return out;
}

function escapeForComment(json: string): string {
  let out = '';
  let from = 0;
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (c === 0x3c || c === 0x3e || c === 0x2028 || c === 0x2029) {
      out += json.slice(from, i) + `\\u${c.toString(16).padStart(4, '0')}`;
      from = i + 1;
    }
  }
  return out + json.slice(from);
}

// ---------------------------------------------------------------------------------------------
// Parsing

/**
 * Read the hand-off decision from a body. Never throws; linear in the body length.
 *
 * - no sentinel outside fenced code → `{ kind: 'absent' }`;
 * - exactly one, valid → `{ kind: 'config', config }` (the zod-parsed config);
 * - otherwise `{ kind: 'invalid', code, diagnostic }`, where the diagnostic names what was wrong
 *   (JSON error, field path, unknown status and the allowed ones, sizes, sentinel count) and is
 *   short enough to be carried into a fallback reason.
 *
 * Tolerates `<!--AGENT_RUN_CONFIG{...}-->` spacing, CRLF line endings and JSON spread over lines.
 */
export function parseSentinel(body: string): SentinelParse {
  const { found } = scanBody(body);
  if (found.length === 0) return { kind: 'absent' };
  if (found.length > 1) {
    return invalid(SentinelDiagnosticCode.multiple, `found ${found.length} AGENT_RUN_CONFIG sentinels outside code blocks; exactly one is allowed`);
  }
  const payload = found[0]!.payload;
  if (payload === null) {
    return invalid(SentinelDiagnosticCode.unterminated, 'the AGENT_RUN_CONFIG marker has no closing "-->" on its line');
  }
  return decodePayload(payload);
}

/**
 * The body with every sentinel outside fenced code removed — well-formed, malformed, unterminated
 * (marker to end of line), in any position. A line left blank by a removal is dropped with its line
 * break. Idempotent: the result contains no sentinel outside fenced code, so stripping it again
 * changes nothing. Sentinels inside fenced code blocks are kept.
 */
export function stripSentinels(body: string): string {
  return scanBody(body).stripped;
}

/** True when the body holds at least one sentinel marker outside fenced code (valid or not). */
export function hasSentinelMarker(body: string): boolean {
  return scanBody(body).found.length > 0;
}

/**
 * The body with every existing sentinel removed (see {@link stripSentinels}), trailing whitespace
 * trimmed, and exactly one rendered sentinel appended on its own last line. If the body ends inside
 * an unclosed code fence, a closing fence line is added first so the new sentinel is a decision,
 * not quoted text. Uses CRLF when the kept text does.
 *
 * Idempotent: `appendSentinelOnce(appendSentinelOnce(b, c), c) === appendSentinelOnce(b, c)`, and
 * `parseSentinel` of the result is `{ kind: 'config', config: c }`.
 *
 * @throws SentinelError when `config` is invalid or too large to render (see {@link renderSentinel}).
 */
export function appendSentinelOnce(body: string, config: AgentRunConfig): string {
  const rendered = renderSentinel(config);
  const { stripped, openFence } = scanBody(body);
  const base = stripped.trimEnd();
  // The line ending comes from what is kept, so appending twice picks the same one.
  const eol = base.includes('\r\n') ? '\r\n' : '\n';
  let out = base.length > 0 ? base + eol : '';
  if (openFence !== null) out += openFence.char.repeat(openFence.length) + eol;
  return out + rendered;
}

type Validated = { ok: true; config: AgentRunConfig } | { ok: false; code: SentinelDiagnosticCode; diagnostic: string };

function invalid(code: SentinelDiagnosticCode, diagnostic: string): Extract<SentinelParse, { kind: 'invalid' }> {
  // Diagnostics travel into one-line reasons: no control characters, bounded length.
  let oneLine = '';
  for (const ch of diagnostic) {
    const c = ch.charCodeAt(0);
    oneLine += c < 0x20 || c === 0x7f || c === 0x2028 || c === 0x2029 ? ' ' : ch;
  }
  return { kind: 'invalid', code, diagnostic: clip(oneLine, MAX_DIAGNOSTIC_CHARS) };
}

/**
 * Check a decision given as a value (an agent result's typed `decision`) by the sentinel's rules:
 * invariants first, then the dispatch status, then every field. The diagnostic names `what` was
 * checked. Never `absent`: a config, or invalid with its code and one-line diagnostic.
 */
export function checkRunConfig(value: unknown, what: string): Exclude<SentinelParse, { kind: 'absent' }> {
  const checked = validateConfig(value, what);
  return checked.ok ? { kind: 'config', config: checked.config } : invalid(checked.code, checked.diagnostic);
}

function decodePayload(payload: string): SentinelParse {
  if (payload.length === 0) return invalid(SentinelDiagnosticCode.badJson, 'the AGENT_RUN_CONFIG payload is empty; expected a JSON object');
  const decoded = parseUntrustedJson(payload, Limits.maxSentinelBytes);
  if (!decoded.ok) {
    switch (decoded.rejection.code) {
      case 'payload_too_large':
        return invalid(
          SentinelDiagnosticCode.tooLarge,
          `the AGENT_RUN_CONFIG payload is ${utf8Length(payload)} bytes; the limit is ${Limits.maxSentinelBytes}`,
        );
      case 'malformed_json':
        return invalid(SentinelDiagnosticCode.badJson, `the AGENT_RUN_CONFIG payload is ${clip(decoded.rejection.message, 200)}`);
      default:
        return invalid(SentinelDiagnosticCode.forbiddenKey, `the AGENT_RUN_CONFIG payload is refused: ${decoded.rejection.message}`);
    }
  }
  const checked = validateConfig(decoded.value, 'the AGENT_RUN_CONFIG payload');
  return checked.ok ? { kind: 'config', config: checked.config } : invalid(checked.code, checked.diagnostic);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Invariants first (the seed's contract), then the dispatch status, then every other field. */
function validateConfig(value: unknown, what: string): Validated {
  if (!isPlainObject(value)) {
    const kind = value === null ? 'null' : Array.isArray(value) ? 'an array' : `a ${typeof value}`;
    return { ok: false, code: SentinelDiagnosticCode.notObject, diagnostic: `${what} must be a JSON object, got ${kind}` };
  }
  const has = (key: string) => Object.prototype.hasOwnProperty.call(value, key) && value[key] !== undefined;
  if (!has('task') && !has('dispatch') && !has('function_call')) {
    return { ok: false, code: SentinelDiagnosticCode.invariant, diagnostic: AT_LEAST_ONE_ACTION };
  }
  if (has('task') && has('function_call')) {
    return { ok: false, code: SentinelDiagnosticCode.invariant, diagnostic: TASK_XOR_FUNCTION_CALL };
  }
  const dispatch = value['dispatch'];
  if (isPlainObject(dispatch) && typeof dispatch['status'] === 'string' && !ALLOWED_STATUSES.includes(dispatch['status'] as DispatchStatus)) {
    return {
      ok: false,
      code: SentinelDiagnosticCode.unknownStatus,
      diagnostic: `dispatch.status: unknown status ${JSON.stringify(clip(dispatch['status'], 64))}; allowed: ${ALLOWED_STATUSES.join(', ')}`,
    };
  }
  const parsed = AgentRunConfigSchema.safeParse(value);
  if (parsed.success) return { ok: true, config: parsed.data };
  const details = parsed.error.issues.slice(0, 3).map((issue) => {
    const path = issue.path.map(String).join('.') || '(root)';
    return `${path}: ${issue.message}`;
  });
  const more = parsed.error.issues.length > 3 ? ` (+${parsed.error.issues.length - 3} more)` : '';
  return { ok: false, code: SentinelDiagnosticCode.schema, diagnostic: details.join('; ') + more };
}

// ---------------------------------------------------------------------------------------------
// The scanner: one pass over the body that tracks code fences and finds sentinel markers.

interface Fence {
  char: '`' | '~';
  length: number;
}

interface FoundSentinel {
  /** The trimmed text between the marker and `-->`; null when unterminated. */
  payload: string | null;
}

interface ScanResult {
  stripped: string;
  found: FoundSentinel[];
  /** The code fence still open at the end of the stripped text, if any. */
  openFence: Fence | null;
}

// Marker automaton states: 0 idle, 1 `<`, 2 `<!`, 3 `<!-`, 4 `<!--` + spaces, 5..20 keyword chars.
const ACCEPT = 4 + SENTINEL_KEYWORD.length;

function step(state: number, c: number): number {
  const restart = c === 0x3c ? 1 : 0;
  switch (state) {
    case 0:
    case ACCEPT:
      return restart;
    case 1:
      return c === 0x21 ? 2 : restart;
    case 2:
      return c === 0x2d ? 3 : restart;
    case 3:
      return c === 0x2d ? 4 : restart;
    case 4:
      if (c === 0x20 || c === 0x09) return 4;
      return c === 0x41 ? 5 : restart;
    default:
      return c === SENTINEL_KEYWORD.charCodeAt(state - 4) ? state + 1 : restart;
  }
}

function isWordChar(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x5f;
}

function isJsonSpace(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
}

/**
 * Stream the body into an output buffer, running the marker automaton on the output (not the
 * input), so a marker formed by joining the text on both sides of a removed sentinel is found too.
 * Every removal moves the input cursor forward, so the pass is linear; the "next `-->`" and "next
 * line break" look-ups are cached because the cursor only moves forward.
 */
function scanBody(text: string): ScanResult {
  const n = text.length;
  const out: string[] = [];
  const stateAt = new Uint8Array(n + 1);
  const startAt = new Int32Array(n + 1).fill(-1);
  const found: FoundSentinel[] = [];
  const lookup = new ForwardLookup(text);
  let state = 0;
  let matchStart = -1;
  let lineStart = 0;
  let lineFenced = false;
  let lineHadRemoval = false;
  let fence: Fence | null = null;

  const finishLine = (): boolean => {
    const line = out.slice(lineStart).join('');
    if (fence !== null) {
      if (closesFence(line, fence)) fence = null;
    } else {
      fence = opensFence(line);
    }
    return lineHadRemoval && isBlank(line);
  };

  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x0a) {
      const drop = finishLine();
      if (drop) out.length = lineStart;
      else out.push('\n');
      state = 0;
      matchStart = -1;
      stateAt[out.length] = 0;
      startAt[out.length] = -1;
      lineStart = out.length;
      lineFenced = fence !== null;
      lineHadRemoval = false;
      i++;
      continue;
    }
    out.push(text[i]!);
    state = step(state, c);
    if (state === 1) matchStart = out.length - 1;
    else if (state === 0) matchStart = -1;
    stateAt[out.length] = state;
    startAt[out.length] = matchStart;
    i++;
    if (state === ACCEPT && !lineFenced && (i >= n || !isWordChar(text.charCodeAt(i)))) {
      const tail = readTail(text, i, lookup);
      found.push({ payload: tail.payload });
      out.length = matchStart;
      state = stateAt[matchStart]!;
      matchStart = startAt[matchStart]!;
      lineHadRemoval = true;
      i = tail.end;
    }
  }
  if (finishLine()) {
    // The last line held only sentinels: drop it with the line break before it.
    out.length = lineStart;
    if (out.length > 0 && out[out.length - 1] === '\n') out.length--;
    if (out.length > 0 && out[out.length - 1] === '\r') out.length--;
  }
  return { stripped: out.join(''), found, openFence: fence };
}

/** Caches the next occurrence of `-->` and of a line break; valid while positions only grow. */
class ForwardLookup {
  private arrowFrom = -1;
  private arrowAt = -1;
  private newlineFrom = -1;
  private newlineAt = -1;
  constructor(private readonly text: string) {}

  nextArrow(pos: number): number {
    if (this.arrowFrom < 0 || pos < this.arrowFrom || (this.arrowAt !== -1 && this.arrowAt < pos)) {
      this.arrowFrom = pos;
      this.arrowAt = this.text.indexOf('-->', pos);
    }
    return this.arrowAt;
  }

  /** Index of the next `\n` at or after pos, or the text length. */
  lineEnd(pos: number): number {
    if (this.newlineFrom < 0 || pos < this.newlineFrom || (this.newlineAt !== -1 && this.newlineAt < pos)) {
      this.newlineFrom = pos;
      this.newlineAt = this.text.indexOf('\n', pos);
    }
    return this.newlineAt === -1 ? this.text.length : this.newlineAt;
  }
}

/** Where the sentinel that starts right after a marker (at `from`) ends, and its payload. */
function readTail(text: string, from: number, lookup: ForwardLookup): { payload: string | null; end: number } {
  const n = text.length;
  const limit = Math.min(n, from + Limits.maxSentinelBytes + 1);
  let j = from;
  while (j < limit && isJsonSpace(text.charCodeAt(j))) j++;
  if (j < n && text.charCodeAt(j) === 0x7b) {
    const close = balancedEnd(text, j, Math.min(n, j + Limits.maxSentinelBytes + 1));
    if (close !== -1) {
      let k = close;
      const kLimit = Math.min(n, close + Limits.maxSentinelBytes);
      while (k < kLimit && isJsonSpace(text.charCodeAt(k))) k++;
      if (text.startsWith('-->', k)) return { payload: text.slice(j, close), end: k + 3 };
    }
  }
  const lineEnd = lookup.lineEnd(from);
  const arrow = lookup.nextArrow(from);
  if (arrow !== -1 && arrow < lineEnd) return { payload: text.slice(from, arrow).trim(), end: arrow + 3 };
  const end = lineEnd > from && text.charCodeAt(lineEnd - 1) === 0x0d ? lineEnd - 1 : lineEnd;
  return { payload: null, end };
}

/**
 * Index just past the bracket that balances the `{` at `start`, skipping JSON strings; -1 when the
 * text is not JSON-shaped before `limit` (a raw line break inside a string, a `-->` outside one).
 */
function balancedEnd(text: string, start: number, limit: number): number {
  let depth = 0;
  let inString = false;
  for (let k = start; k < limit; k++) {
    const c = text.charCodeAt(k);
    if (inString) {
      if (c === 0x5c) k++;
      else if (c === 0x22) inString = false;
      else if (c === 0x0a) return -1;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) {
      depth--;
      if (depth === 0) return k + 1;
    } else if (c === 0x2d && text.startsWith('-->', k)) return -1;
  }
  return -1;
}

function isBlank(line: string): boolean {
  for (let k = 0; k < line.length; k++) {
    const c = line.charCodeAt(k);
    if (c !== 0x20 && c !== 0x09 && c !== 0x0d) return false;
  }
  return true;
}

/** A CommonMark fence opener: up to 3 spaces, then 3+ backticks (info without backticks) or tildes. */
function opensFence(line: string): Fence | null {
  let k = 0;
  while (k < 3 && line.charCodeAt(k) === 0x20) k++;
  const ch = line[k];
  if (ch !== '`' && ch !== '~') return null;
  let length = 0;
  while (line[k + length] === ch) length++;
  if (length < 3) return null;
  if (ch === '`' && line.indexOf('`', k + length) !== -1) return null;
  return { char: ch, length };
}

/** A closer: up to 3 spaces, at least as many of the opener's char, then only whitespace. */
function closesFence(line: string, fence: Fence): boolean {
  let k = 0;
  while (k < 3 && line.charCodeAt(k) === 0x20) k++;
  let length = 0;
  while (line[k + length] === fence.char) length++;
  return length >= fence.length && isBlank(line.slice(k + length));
}

/** What a run keeps of an agent's turn: the posted text and whether it was cut to the cap. */
export interface PostedBody {
  text: string;
  truncated: boolean;
}

/**
 * The body as Baton posts it (seed 000: the sentinel is engine-rendered and appended exactly
 * once): every sentinel the agent wrote removed, the text cut to `maxChars` (the cut is marked),
 * and exactly one canonical sentinel for `decision` appended on its own line — none when the agent
 * took no decision. Null when there is neither text nor decision. Pure and idempotent over its
 * own output for the same decision.
 */
export function postedBodyOf(body: string | undefined, decision: AgentRunConfig | null, maxChars: number = Limits.maxPostedBodyChars): PostedBody | null {
  const stripped = body === undefined ? '' : stripSentinels(body).trimEnd();
  const truncated = stripped.length > maxChars;
  const kept = truncated ? `${stripped.slice(0, maxChars)}\n… (cut at ${maxChars} characters)` : stripped;
  if (decision === null) return kept.length > 0 ? { text: kept, truncated } : null;
  try {
    return { text: appendSentinelOnce(kept, decision), truncated };
  } catch {
    // A decision too large to render (never one that passed validation): keep the words alone.
    return kept.length > 0 ? { text: kept, truncated } : null;
  }
}
