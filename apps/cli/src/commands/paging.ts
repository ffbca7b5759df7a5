import type { z } from 'zod';
import { InvalidCursorError, type ItemFilters, type ProjectionStore } from '@baton/projections';
import { int, str, type ParsedArgs } from '../command';
import { CliWarningCode, ExitCode, UsageError } from '../errors';
import { projectArg } from '../timeline';
import { redactUrl } from '@baton/platform';
import { type CliContext } from '../context';
import { printJson, renderTable, type CliIo, type Column } from '../output';

// What the listing commands (`baton inbox`, `baton stops`) share: repeatable filter options, the
// paging options and how a page is printed.

/** The paging options every listing command takes, for `parseCommandArgs`. */
export const PAGE_OPTIONS = {
  limit: { type: 'string' },
  cursor: { type: 'string' },
  json: { type: 'boolean' },
  'json-page': { type: 'boolean' },
} as const;

/** One page of a projection listing. */
export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

/** The values of a repeatable string option (`--why a --why b` or `--why a,b`). */
export function listOf(value: unknown): string[] {
  const raw = Array.isArray(value) ? value : [value];
  return raw.flatMap((v) => (typeof v === 'string' ? v.split(',').map((s) => s.trim()) : [])).filter((v) => v.length > 0);
}

/**
 * Refuse (exit 2) a value of a filter that takes only `allowed` values — the API answers such a
 * value 400; read straight from the projections it would match nothing and print an empty list.
 */
export function checkAllowed(option: string, values: readonly string[], allowed: readonly string[]): void {
  const bad = values.filter((value) => !allowed.includes(value));
  if (bad.length > 0) throw new UsageError(`--${option} takes ${allowed.join(', ')}; got ${bad.map((value) => JSON.stringify(value)).join(', ')}`);
}

/**
 * Refuse (exit 2) a `--project` that is not a project key, as `run`, `token` and `creds` do: read
 * straight from the projections it would match nothing and print an empty list.
 */
export function checkProjects(values: readonly string[]): void {
  for (const project of values) projectArg(project);
}

/**
 * Refuse (exit 2) a value of an id or name filter (`--agent`, `--run`) that the contract's schema —
 * the one the API's query checks the same filter with (apps/notifier/src/api/schemas.ts) — refuses:
 * the API answers it 400 `schema_violation`; read straight from the projections it would match
 * nothing and print an empty list, as if there were nothing to do.
 */
export function checkIds(option: string, values: readonly string[], schema: z.ZodType<string>): void {
  for (const value of values) {
    const parsed = schema.safeParse(value);
    if (!parsed.success) throw new UsageError(`--${option} ${JSON.stringify(value)}: ${parsed.error.issues.map((issue) => issue.message).join('; ')}`);
  }
}

/** Item filters from repeatable options (one value → that value, several → any of them). */
export function filtersOf(values: Record<string, unknown>, fields: readonly (keyof ItemFilters)[]): ItemFilters {
  const filters: ItemFilters = {};
  for (const field of fields) {
    const list = listOf(values[field]);
    if (list.length === 1) filters[field] = list[0]!;
    else if (list.length > 1) filters[field] = list;
  }
  return filters;
}

/** `--limit` (1–500, default 50) and `--cursor` as a read takes them. */
export function pageRequest(args: ParsedArgs): { limit: number; cursor: string | null } {
  return { limit: int(args, 'limit', { min: 1, max: 500 }) ?? 50, cursor: str(args, 'cursor') ?? null };
}

/** Read one page; a cursor the projections do not recognise is the user's mistake (exit 2), not a crash. */
export async function readPage<T>(read: () => Promise<Page<T>>): Promise<Page<T>> {
  try {
    return await read();
  } catch (error) {
    if (error instanceof InvalidCursorError) throw new UsageError(`--cursor: ${error.message}`);
    throw error;
  }
}

/**
 * Warn (stderr) why a listing is empty when its projection has no live generation under this
 * keyspace (never built, or `BATON_PREFIX` / `BATON_PROJECTION_PREFIX` names another one): without
 * it a wrong prefix reads as an empty inbox. stdout stays the (empty) listing, the exit code 0.
 * With `--json` it is the warning `projection_not_built` of stderr's JSON line (see {@link CliContext.warn}).
 */
export async function warnIfUnbuilt<T>(ctx: CliContext, store: ProjectionStore, projection: string, page: Page<T>): Promise<void> {
  if (page.items.length > 0 || page.nextCursor !== null) return;
  if ((await store.status({ name: projection, version: 0 })).activeGeneration !== null) return;
  const redis = redactUrl(ctx.config().REDIS_URL);
  ctx.warn(
    CliWarningCode.projectionNotBuilt,
    `no ${projection} projection under "${store.prefix}" in Redis at ${redis}: never built, BATON_PREFIX / BATON_PROJECTION_PREFIX names another keyspace, ` +
      `or this is not the platform's Redis (\`baton streams\` shows the prefix's streams; \`baton replay --projection ${projection}\` builds it)`,
    undefined,
    { projection, prefix: store.prefix, redis_url: redis },
  );
}

/**
 * Print a page: with `--json-page` one JSON object `{ items, next_cursor }` (what a script pages
 * with, as the API's own pages), followed by the listing's own fields of the API's page
 * (`table.pageFields`: the inbox's `open_count`); with `--json` the items as a JSON array (the next
 * cursor on stderr as the JSON line `{"next_cursor":"<c>"}`, so stdout stays one JSON value and
 * stderr holds JSON only); else a table and the command that reads the next page.
 */
export function printPage<T>(
  io: CliIo,
  args: ParsedArgs,
  page: Page<T>,
  table: { command: string; columns: Column<T>[]; empty: string; pageFields?: Record<string, unknown> },
): ExitCode {
  if (args.values['json-page'] === true) {
    printJson(io, { items: page.items, next_cursor: page.nextCursor, ...table.pageFields });
    return ExitCode.ok;
  }
  if (args.values['json'] === true) {
    printJson(io, page.items);
    if (page.nextCursor) io.stderr.write(`${JSON.stringify({ next_cursor: page.nextCursor })}\n`);
    return ExitCode.ok;
  }
  io.stdout.write(renderTable<T>(page.items, table.columns, table.empty));
  if (page.nextCursor) io.stdout.write(`\nmore: ${nextPageCommand(table.command, args, page.nextCursor)}\n`);
  return ExitCode.ok;
}

/** A word as a POSIX shell reads it back: bare when it is safe, else single-quoted. */
function shellWord(word: string): string {
  return /^[A-Za-z0-9_./:=@%+,-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * The command that reads the next page: the same command with the same filters and limit (a cursor
 * carries only the position, so without them the next page would be of another listing) and the
 * new cursor.
 */
export function nextPageCommand(command: string, args: ParsedArgs, cursor: string): string {
  const words = ['baton', command];
  for (const [name, value] of Object.entries(args.values)) {
    if (name === 'cursor' || value === undefined || value === false) continue;
    if (value === true) words.push(`--${name}`);
    else for (const one of Array.isArray(value) ? value : [value]) words.push(`--${name}`, shellWord(String(one)));
  }
  words.push('--cursor', shellWord(cursor));
  return words.join(' ');
}
