import { createBatonViews, InvalidCursorError, type InboxItem, type ItemFilters } from '@baton/projections';
import type { Command } from '../command';
import { int, parseCommandArgs, str } from '../command';
import { ExitCode, UsageError } from '../errors';
import { isoOf, printJson, renderTable } from '../output';

const FILTERS = ['project', 'kind', 'why', 'agent', 'priority'] as const;

export const inboxCommand: Command = {
  name: 'inbox',
  summary: 'list the operator inbox: stops, holds, handbacks and escalations to act on',
  help: `Usage: baton inbox [filters] [--limit n] [--cursor c] [--order newest|urgent] [--json]

Read the operator inbox straight from the Redis projections (the same read side as
GET /v1/inbox). Open items only, unless --status says otherwise.

Filters (repeat one, or give a comma-separated list: any of the values matches):
  --project <p>    --kind stop|hold|handback|escalation    --why <why>
  --agent <a>      --priority low|medium|high|urgent       --status open|answered|closed|any (default open)

Options:
  --limit <n>      page size, 1-500 (default 50)
  --cursor <c>     the next-page cursor a previous call printed
  --order <o>      newest (default) or urgent
  --json           print the items as a JSON array (the next cursor goes to stderr)
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(
      argv,
      {
        project: { type: 'string', multiple: true },
        kind: { type: 'string', multiple: true },
        why: { type: 'string', multiple: true },
        agent: { type: 'string', multiple: true },
        priority: { type: 'string', multiple: true },
        status: { type: 'string', multiple: true },
        limit: { type: 'string' },
        cursor: { type: 'string' },
        order: { type: 'string' },
        json: { type: 'boolean' },
      },
      { min: 0, max: 0 },
    );
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const filters = filtersOf(args.values, FILTERS);
    const status = listOf(args.values['status']);
    if (!status.includes('any') && !status.includes('all')) filters.status = status.length > 0 ? status : 'open';
    const order = str(args, 'order') ?? 'newest';
    if (order !== 'newest' && order !== 'urgent') throw new UsageError(`--order must be newest or urgent, got "${order}"`);
    const views = createBatonViews(await ctx.projections());
    let page;
    try {
      page = await views.inbox({ filters, order, limit: int(args, 'limit', { min: 1, max: 500 }) ?? 50, cursor: str(args, 'cursor') ?? null });
    } catch (error) {
      if (error instanceof InvalidCursorError) throw new UsageError(`--cursor: ${error.message}`);
      throw error;
    }
    if (args.values['json'] === true) {
      printJson(ctx.io, page.items);
      if (page.nextCursor) ctx.io.stderr.write(`next cursor: ${page.nextCursor}\n`);
      return ExitCode.ok;
    }
    ctx.io.stdout.write(
      renderTable<InboxItem>(
        page.items,
        [
          { header: 'id', value: (i) => i.id, max: 48 },
          { header: 'kind', value: (i) => i.kind },
          { header: 'project', value: (i) => i.project },
          { header: 'why', value: (i) => i.why },
          { header: 'agent', value: (i) => i.agent },
          { header: 'priority', value: (i) => i.priority },
          { header: 'status', value: (i) => i.status },
          { header: 'opened', value: (i) => isoOf(i.at) },
          { header: 'title', value: (i) => i.title, max: 70 },
        ],
        'the inbox is empty',
      ),
    );
    if (page.nextCursor) ctx.io.stdout.write(`\nmore: baton inbox --cursor ${page.nextCursor}\n`);
    return ExitCode.ok;
  },
};

/** The values of a repeatable string option. */
export function listOf(value: unknown): string[] {
  const raw = Array.isArray(value) ? value : [value];
  return raw.flatMap((v) => (typeof v === 'string' ? v.split(',').map((s) => s.trim()) : [])).filter((v) => v.length > 0);
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
