import { ActorNameSchema, HandoffEscalatedSchema, HandoffPrioritySchema, HoldKindSchema } from '@baton/contracts';
import { createBatonViews, InboxKind, InboxStatus, InboxWhys, type InboxItem } from '@baton/projections';
import type { Command } from '../command';
import { parseCommandArgs, str } from '../command';
import { ExitCode, UsageError } from '../errors';
import { isoOf } from '../output';
import { checkAllowed, checkIds, checkProjects, filtersOf, listOf, PAGE_OPTIONS, pageRequest, printPage, readPage, warnIfUnbuilt } from './paging';

const FILTERS = ['project', 'kind', 'why', 'agent', 'priority'] as const;

export const inboxCommand: Command = {
  name: 'inbox',
  summary: 'list the operator inbox: stops, holds, handbacks and escalations to act on',
  help: `Usage: baton inbox [filters] [--limit n] [--cursor c] [--order newest|urgent] [--json | --json-page]

Read the operator inbox straight from the Redis projections (the same read side as
GET /v1/inbox). Open items only, unless --status says otherwise. When the inbox projection was
never built under this keyspace (BATON_PREFIX / BATON_PROJECTION_PREFIX), a warning on stderr says so
(with --json as JSON: the line {"warnings":[{"code":"projection_not_built",…}]}).

An item's id is stop:<project>:<packet_id>, hold:<seq>:<project>:<workflow_run_id>,
handback:<project>:<handoff_id> or escalation:<project>:<handoff_id> (ids may hold ":", a project
never does). To act on it: baton answer <packet_id>, baton answer-hold <workflow_run_id>,
baton decide <handoff_id> — each with --project <project>. The table prints ids whole.

Filters (repeat one, or give a comma-separated list: any of the values matches):
  --project <p>    --kind stop|hold|handback|escalation    --why <why>
  --agent <a>      --priority low|medium|high|urgent       --status open|answered|closed|any (default open)
  (--agent: an actor name, letters, digits and _ - . : @, as GET /v1/inbox takes it; another value
  is a usage error, exit 2. --why: a stop's why, ${HoldKindSchema.options.join(' or ')} for a hold, ${HandoffEscalatedSchema.shape.cause.options.join(', ')} for an escalation)

Options:
  --limit <n>      page size, 1-500 (default 50)
  --cursor <c>     the next-page cursor a previous call printed
  --order <o>      newest (default) or urgent
  --json           print the items as a JSON array (the next cursor goes to stderr, as the JSON
                   line {"next_cursor":"<c>"})
  --json-page      print one JSON object { items, next_cursor, open_count } as GET /v1/inbox answers
                   it: next_cursor null on the last page; open_count how many open items the
                   filters other than --status select (the size of the inbox, not of the page)
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
        order: { type: 'string' },
        ...PAGE_OPTIONS,
      },
      { min: 0, max: 0 },
    );
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    checkProjects(listOf(args.values['project']));
    checkAllowed('kind', listOf(args.values['kind']), Object.values(InboxKind));
    checkAllowed('why', listOf(args.values['why']), InboxWhys);
    checkAllowed('priority', listOf(args.values['priority']), HandoffPrioritySchema.options);
    // The rule GET /v1/inbox applies to agent (an actor name): a value it refuses is a usage error, not an empty inbox.
    checkIds('agent', listOf(args.values['agent']), ActorNameSchema);
    const filters = filtersOf(args.values, FILTERS);
    const status = listOf(args.values['status']);
    checkAllowed('status', status, [...Object.values(InboxStatus), 'any', 'all']);
    if (!status.includes('any') && !status.includes('all')) filters.status = status.length > 0 ? status : 'open';
    const order = str(args, 'order') ?? 'newest';
    if (order !== 'newest' && order !== 'urgent') throw new UsageError(`--order must be newest or urgent, got "${order}"`);
    const store = await ctx.projections();
    const views = createBatonViews(store);
    const page = await readPage(() => views.inbox({ filters, order, ...pageRequest(args) }));
    await warnIfUnbuilt(ctx, store, 'inbox', page);
    // The count GET /v1/inbox answers with the page (the same read: BatonViews.inboxOpenCount).
    const pageFields = args.values['json-page'] === true ? { open_count: await views.inboxOpenCount(filters) } : undefined;
    return printPage<InboxItem>(ctx.io, args, page, {
      command: 'inbox',
      columns: [
        { header: 'id', value: (i) => i.id, whole: true },
        { header: 'kind', value: (i) => i.kind },
        { header: 'project', value: (i) => i.project },
        { header: 'why', value: (i) => i.why },
        { header: 'agent', value: (i) => i.agent },
        { header: 'priority', value: (i) => i.priority },
        { header: 'status', value: (i) => i.status },
        { header: 'opened', value: (i) => isoOf(i.at) },
        { header: 'title', value: (i) => i.title, max: 50 },
      ],
      empty: 'the inbox is empty',
      ...(pageFields !== undefined ? { pageFields } : {}),
    });
  },
};
