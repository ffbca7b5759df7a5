import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  EdgeRefusalReasons,
  GovernanceErrorCode,
  LedgerAccessErrorCode,
  LedgerErrorCode,
  MeshDiagnosticCode,
  MeshIgnoreReasonSchema,
  RejectionCode,
} from '@baton/contracts';
import { HandoffErrorCode, HandoffRefusalCode, MeshErrorCode, ProjectControlErrorCode, ResultClaimCode, ResumeErrorCode, RunErrorCode } from '@baton/domain';
import { DeadLetterReason, EventStoreErrorCode, RedriveSkip } from '@baton/eventstore';
import { SdkErrorCode } from '@baton/sdk';

/*
 * docs/errors.md is the list of codes a client can receive. This test fails when the code gains a
 * code the page does not list, or the page lists a code the code does not have. Pure file reads and
 * imports: no service runs.
 *
 * Where a code comes from:
 * - the exported const objects of the libraries (imported);
 * - the const objects of the apps (DefinitionErrorCode, RouterRunErrorCode, ExitCode), read from
 *   their source: a test does not import an app by path;
 * - string literals the apps and the SDK answer with, found by a scan of their source (the
 *   operator API's `new ApiError(status, '<code>'`, `code: '<code>'`, a dead letter's or
 *   PoisonError's literal reason...).
 *
 * The page is read as tables: every row's first cell names its code(s) in backticks, and the row
 * belongs to the nearest heading above it. Each section has the codes it must list (all of them)
 * and may list (nothing else), so deleting a row, or listing a code under the wrong heading, fails.
 */

const root = join(__dirname, '..', '..');
const PAGE = 'docs/errors.md';

const values = (...objects: object[]): string[] => objects.flatMap((o) => Object.values(o).map(String));

/** TypeScript sources of a folder, without tests, test support or fixtures. */
function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'int' && entry.name !== 'testing') out.push(...sources(path));
    } else if (entry.name.endsWith('.ts') && !/\.(spec|int-spec|e2e-spec|fixtures)\.ts$|int-support\.ts$|\.d\.ts$/.test(entry.name)) {
      out.push(path);
    }
  }
  return out;
}

const read = (path: string) => readFileSync(join(root, path), 'utf8');

/** Skip a quoted string starting at `i`; returns the index of its closing quote. */
function skipString(text: string, i: number): number {
  const quote = text[i];
  for (let j = i + 1; j < text.length; j++) {
    if (text[j] === '\\') j++;
    else if (text[j] === quote) return j;
  }
  return text.length;
}

/** Skip a template literal starting at `i` (with its `${…}` parts); returns the index of its closing backtick. */
function skipTemplate(text: string, i: number): number {
  for (let j = i + 1; j < text.length; j++) {
    if (text[j] === '\\') j++;
    else if (text[j] === '`') return j;
    else if (text[j] === '$' && text[j + 1] === '{') j = splitUntil(text, j + 2, '}').end;
  }
  return text.length;
}

/** Read code from `start` up to the unmatched `closer`, split at its top-level commas. */
function splitUntil(text: string, start: number, closer: string): { parts: string[]; end: number } {
  const parts: string[] = [];
  const stack: string[] = [];
  const pairs: Record<string, string> = { '(': ')', '[': ']', '{': '}' };
  let from = start;
  for (let j = start; j < text.length; j++) {
    const c = text[j]!;
    if (c === "'" || c === '"') j = skipString(text, j);
    else if (c === '`') j = skipTemplate(text, j);
    else if (c === '/' && text[j + 1] === '/') j = text.indexOf('\n', j) < 0 ? text.length : text.indexOf('\n', j);
    else if (c === '/' && text[j + 1] === '*') j = text.indexOf('*/', j) + 1;
    else if (c in pairs) stack.push(pairs[c]!);
    else if (stack.length === 0 && c === closer) {
      parts.push(text.slice(from, j).trim());
      return { parts, end: j };
    } else if (c === ')' || c === ']' || c === '}') stack.pop();
    else if (stack.length === 0 && c === ',') {
      parts.push(text.slice(from, j).trim());
      from = j + 1;
    }
  }
  return { parts, end: text.length };
}

/** The arguments (as source text) of every call of `callee` in `text`. */
function callsOf(text: string, callee: RegExp): string[][] {
  const calls: string[][] = [];
  for (const match of text.matchAll(new RegExp(`${callee.source}\\(`, 'g'))) {
    calls.push(splitUntil(text, match.index! + match[0].length, ')').parts);
  }
  return calls;
}

/** A single-quoted snake_case literal (the shape of every Baton code), or null. */
function literal(arg: string | undefined): string | null {
  return arg !== undefined && /^'[a-z][a-z0-9_]*'$/.test(arg) ? arg.slice(1, -1) : null;
}

/** Every first group of `pattern` in `text`. */
function captureIn(text: string, pattern: RegExp): string[] {
  return [...text.matchAll(new RegExp(pattern.source, 'g'))].map((m) => m[1]!);
}

/** Every first group of `pattern` in the given files. */
function capture(files: string[], pattern: RegExp): string[] {
  return files.flatMap((file) => captureIn(read(file), pattern));
}

/** The values of `export const <name> = { … } as const` in an app's source (string and number values). */
function constObject(file: string, name: string): string[] {
  const body = new RegExp(`export const ${name} = \\{([\\s\\S]*?)\\n\\} as const;`).exec(read(file))?.[1];
  if (body === undefined) throw new Error(`${file} has no const object ${name}`);
  const found = [...body.matchAll(/:\s*(?:'([^']+)'|(\d+))\s*,/g)].map((m) => m[1] ?? m[2]!);
  if (found.length === 0) throw new Error(`${file}: ${name} has no string or number values`);
  return found;
}

/** `code: 'x'` names a code, except in a zod refinement (`ctx.addIssue({ code: 'custom' …`). */
const CODE_FIELD = /\bcode:\s*'([a-z][a-z0-9_]*)'/;
const ZOD_ISSUE_CODES = new Set(['custom']);
const codeFields = (files: string[]) => capture(files, CODE_FIELD).filter((c) => !ZOD_ISSUE_CODES.has(c));

// --- what the code emits -------------------------------------------------------------------------

const notifierFiles = sources('apps/notifier/src');
const routerFiles = [...sources('apps/router/src'), ...sources('libs/platform/src/transport')];
const ledgerFiles = sources('apps/ledger/src');
const sdkFiles = sources('libs/sdk/src');
const everyFile = [...sources('apps'), ...sources('libs')];

/** The operator API and web pages: `new ApiError(status, '<code>'`, `new WebRefusal(status, '<code>'`, `code: '<code>'`, the HTTP server's refusals, the error filter's fallbacks. */
const httpCodes = [
  ...notifierFiles.flatMap((file) => callsOf(read(file), /new (?:ApiError|WebRefusal)/).map((args) => literal(args[1]))),
  ...codeFields(notifierFiles),
  // apps/notifier/src/http/server-limits.ts: [status, reason phrase, code, message]
  ...capture(notifierFiles, /\[\s*\d{3},\s*'[^']*',\s*'([a-z_]+)'/),
  // apps/notifier/src/api/http.ts: `const code = status === … ? '<code>' : …;`
  ...capture(notifierFiles, /const code =([^;]*);/).flatMap((expression) => captureIn(expression, /'([a-z_]+)'/)),
].filter((c): c is string => c !== null);

/** Literal codes the router answers, dead-letters or records (and its Nest transport's replies). */
const routerCodes = [...codeFields(routerFiles), ...capture(routerFiles, /export const [A-Z_]+_CODE = '([a-z_]+)'/)];
/** Literal codes the ledger answers besides its const objects. */
const ledgerCodes = [...codeFields(ledgerFiles), ...capture(ledgerFiles, /\brefused\(\s*'([a-z_]+)'/)];
/** Codes of the SDK's own errors: SdkErrorCode (each error class's), and any `{ code: '<code>' }` literal of its sources. */
const sdkCodes = [...values(SdkErrorCode), ...codeFields(sdkFiles), ...capture(sdkFiles, /\bcode \?\? '([a-z_]+)'/)];
/** Literal dead-letter reasons: `new PoisonError(message, '<reason>'` and `deadLetter({ reason: '<reason>' })`. */
const deadLetterCodes = everyFile
  .flatMap((file) => {
    const text = read(file);
    return [
      ...callsOf(text, /new PoisonError/).map((args) => literal(args[1])),
      ...callsOf(text, /\bdeadLetter/).flatMap((args) => captureIn(args[0] ?? '', /\breason:\s*'([a-z_]+)'/)),
    ];
  })
  .filter((c): c is string => c !== null);
/** CLI exit codes: ExitCode (130, interrupted, included). */
const exitCodes = constObject('apps/cli/src/errors.ts', 'ExitCode');
/** The CLI's own failure codes (CliErrorCode), and the event store's permission_denied it passes on. */
const cliCodes = [...constObject('apps/cli/src/errors.ts', 'CliErrorCode'), 'permission_denied'];
/** The codes of the CLI's warnings (CliWarningCode): with --json, stderr's `{"warnings":[…]}` line and a failure's details.warnings. */
const cliWarningCodes = constObject('apps/cli/src/errors.ts', 'CliWarningCode');

const definitionCodes = constObject('apps/router/src/definitions/definition.decider.ts', 'DefinitionErrorCode');
const routerRunCodes = constObject('apps/router/src/runs/router-run.decider.ts', 'RouterRunErrorCode');

// --- what the page must list, section by section --------------------------------------------------

interface Section {
  /** The heading's title (after its number), as the page writes it. */
  title: string;
  /** Codes this section must list. */
  must: string[];
  /** Groups of scanned literals this section takes: each literal must be listed in a section that takes its group, and may be listed here. */
  takes?: (keyof typeof groups)[];
}

const groups = {
  ledger: ledgerCodes,
  router: routerCodes,
  http: httpCodes,
  sdk: sdkCodes,
  deadLetters: deadLetterCodes,
};

/** npm start's refusals: `[start] error (<code>)` in scripts/start.js and the NatsListenError codes of scripts/nats-listen.js. */
const startCodes = [
  ...[...read('scripts/start.js').matchAll(/\[start\] error \(([a-z_]+)\)/g)].map((m) => m[1]!),
  ...[...read('scripts/nats-listen.js').matchAll(/new NatsListenError\(\s*'([a-z_]+)'/g)].map((m) => m[1]!),
];

const sections: Section[] = [
  { title: 'Input rejections', must: values(RejectionCode), takes: ['ledger', 'router'] },
  {
    title: 'Ledger replies',
    must: values(HandoffErrorCode, LedgerErrorCode, LedgerAccessErrorCode, GovernanceErrorCode, ProjectControlErrorCode),
    takes: ['ledger'],
  },
  { title: 'Runs', must: [...values(RunErrorCode, ResultClaimCode), ...routerRunCodes], takes: ['router'] },
  { title: 'Stop and hold answers', must: values(ResumeErrorCode) },
  { title: 'Conversation routes', must: values(HandoffRefusalCode), takes: ['router'] },
  { title: 'Handoff meshes', must: [...values(MeshErrorCode), ...MeshIgnoreReasonSchema.options], takes: ['router'] },
  { title: 'Project definitions', must: [...definitionCodes, ...values(MeshDiagnosticCode)], takes: ['router'] },
  // The API answers the ledger's idempotency_key_reused itself (409 with `details.decided`), by the ledger's constant.
  { title: 'Operator HTTP API', must: [HandoffErrorCode.idempotencyKeyReused], takes: ['http'] },
  // EdgeRefusedError's code is the agent edge's reason; publishResult refuses a result naming no claim with the claim rule's code.
  { title: 'SDK errors', must: [...values(SdkErrorCode), ...EdgeRefusalReasons, ResultClaimCode.claimRequired], takes: ['sdk'] },
  { title: 'Event store errors', must: values(EventStoreErrorCode) },
  { title: 'Dead-letter reasons', must: values(DeadLetterReason), takes: ['deadLetters'] },
  { title: 'Redrive skip reasons', must: values(RedriveSkip) },
  { title: 'CLI exit codes', must: exitCodes },
  { title: 'CLI failure codes', must: cliCodes },
  { title: 'CLI warning codes', must: cliWarningCodes },
  { title: 'Agent edge answers', must: [...EdgeRefusalReasons] },
  { title: 'npm start refusals', must: startCodes },
];

// --- what the page lists --------------------------------------------------------------------------

/** The codes in the first cell of each table row, by the title of the nearest heading above. */
function listedCodes(markdown: string): Map<string, string[]> {
  const listed = new Map<string, string[]>();
  let title = '';
  for (const line of markdown.split('\n')) {
    const heading = /^#{2,4}\s+(?:[\d.]+\s+)?(.+?)\s*$/.exec(line);
    if (heading) {
      title = heading[1]!;
      continue;
    }
    if (!line.startsWith('|') || /^\|[\s:|-]+\|?\s*$/.test(line)) continue;
    const first = line.split('|')[1] ?? '';
    const codes = [...first.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
    if (codes.length > 0) listed.set(title, [...(listed.get(title) ?? []), ...codes]);
  }
  return listed;
}

const sectionFor = (title: string) => sections.find((s) => title === s.title || title.startsWith(`${s.title} `) || title.startsWith(`${s.title}:`));

describe(`${PAGE} lists every code a client can receive`, () => {
  const listed = listedCodes(read(PAGE));

  it('the scans find what they look for (a scan that silently finds nothing would prove nothing)', () => {
    expect(httpCodes).toEqual(expect.arrayContaining(['unauthenticated', 'role_forbidden', 'headers_too_large', 'http_error', 'internal_error']));
    expect(routerCodes).toEqual(expect.arrayContaining(['unknown_workflow', 'unknown_mesh', 'deadline']));
    expect(ledgerCodes).toEqual(expect.arrayContaining(['internal_error', 'payload_too_large']));
    expect(sdkCodes).toEqual(expect.arrayContaining(['sdk_error', 'not_claimed', 'offer_terminated', 'mesh_invalid']));
    expect(deadLetterCodes).toEqual(expect.arrayContaining(['ledger_refused', 'policy_refused', 'no_handler']));
    expect(exitCodes).toEqual(expect.arrayContaining(['0', '1', '2', '130']));
    expect(cliWarningCodes).toEqual(expect.arrayContaining(['creds_allow_responses', 'projections_unavailable', 'restart_required']));
    expect(startCodes).toEqual(expect.arrayContaining(['already_running', 'store_in_use', 'store_left_behind', 'nats_port_in_use', 'nats_server_exited']));
  });

  it('every table row sits under a section this test knows', () => {
    expect([...listed.keys()].filter((title) => sectionFor(title) === undefined)).toEqual([]);
  });

  it.each(sections.map((s) => [s.title, s] as const))('%s: lists every code of its sources', (_title, section) => {
    const here = new Set([...listed].filter(([title]) => sectionFor(title) === section).flatMap(([, codes]) => codes));
    expect([...new Set(section.must)].filter((code) => !here.has(code)).sort()).toEqual([]);
  });

  it.each(Object.keys(groups) as (keyof typeof groups)[])('scanned literals of %s: each is listed in a section that takes them', (group) => {
    const takers = sections.filter((s) => s.takes?.includes(group));
    const here = new Set([...listed].filter(([title]) => takers.includes(sectionFor(title)!)).flatMap(([, codes]) => codes));
    const missing = [...new Set(groups[group])].filter((code) => !here.has(code));
    expect(missing.sort()).toEqual([]);
  });

  it.each(sections.map((s) => [s.title, s] as const))('%s: lists no code the code does not emit there', (_title, section) => {
    const allowed = new Set([...section.must, ...(section.takes ?? []).flatMap((group) => groups[group])]);
    const here = [...listed].filter(([title]) => sectionFor(title) === section).flatMap(([, codes]) => codes);
    expect(here.filter((code) => !allowed.has(code)).sort()).toEqual([]);
  });
});
