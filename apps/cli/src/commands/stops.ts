import { AgentNameSchema, IdSchema, StopPacketStatusSchema, StopWhySchema } from '@baton/contracts';
import { createBatonViews, type StopRecord } from '@baton/projections';
import type { Command } from '../command';
import { parseCommandArgs, str } from '../command';
import { ExitCode } from '../errors';
import { checkAllowed, checkIds, checkProjects, filtersOf, listOf, PAGE_OPTIONS, pageRequest, printPage, readPage, warnIfUnbuilt } from './paging';

export const stopsCommand: Command = {
  name: 'stops',
  summary: 'list stop packets (why the runs stopped, what they tried, the form to answer)',
  help: `Usage: baton stops [--why w] [--run r] [--agent a] [--status open|answered|any] [--project p] [--json | --json-page]

Read stop packets from the Redis projections (the same read side as GET /v1/stops), newest first.
Repeat a filter to match any of its values. When the stops projection was never built under this
keyspace (BATON_PREFIX / BATON_PROJECTION_PREFIX), a warning on stderr says so (with --json as
JSON: the line {"warnings":[{"code":"projection_not_built",…}]}). The table prints packet and run ids whole: baton answer <packet>
--project <project> answers one.

Options:
  --why <why>       unknown_intent, policy, budget, parse_fail, thrash, circuit_open, banned_click, guard_failed
  --run <id>        only the packets of the runs of this id (in every project, or those of --project)
  --agent <a>       the agent that stopped (an agent name, as GET /v1/stops takes it: another
                    value is a usage error, exit 2, as a malformed --run or --project is)
  --status <s>      open, answered, or any (all; the default: both)
  --project <p>     the project
  --limit <n>       page size, 1-500 (default 50)
  --cursor <c>      the next-page cursor a previous call printed
  --json            print the packets (each { stop, effect, answered_at, mesh_run_id }) as a JSON
                    array (the next cursor goes to stderr, as the JSON line {"next_cursor":"<c>"})
  --json-page       print one JSON object { items, next_cursor } (null on the last page)
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(
      argv,
      {
        why: { type: 'string', multiple: true },
        run: { type: 'string' },
        agent: { type: 'string', multiple: true },
        status: { type: 'string', multiple: true },
        project: { type: 'string', multiple: true },
        ...PAGE_OPTIONS,
      },
      { min: 0, max: 0 },
    );
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    checkProjects(listOf(args.values['project']));
    checkAllowed('why', listOf(args.values['why']), StopWhySchema.options);
    // The rules GET /v1/stops applies to agent (an agent name) and run (an id): a value it refuses is a usage error, not an empty list.
    checkIds('agent', listOf(args.values['agent']), AgentNameSchema);
    const run = str(args, 'run');
    if (run !== undefined) checkIds('run', [run], IdSchema);
    const status = listOf(args.values['status']);
    checkAllowed('status', status, [...StopPacketStatusSchema.options, 'any', 'all']);
    // `any` (or `all`), as GET /v1/stops takes it: both statuses, the default.
    const everyStatus = status.includes('any') || status.includes('all');
    const store = await ctx.projections();
    const views = createBatonViews(store);
    const page = await readPage(() =>
      views.stops({
        filters: filtersOf(args.values, everyStatus ? ['why', 'agent', 'project'] : ['why', 'agent', 'status', 'project']),
        ...(run !== undefined ? { run } : {}),
        ...pageRequest(args),
      }),
    );
    await warnIfUnbuilt(ctx, store, 'stops', page);
    return printPage<StopRecord>(ctx.io, args, page, {
      command: 'stops',
      columns: [
        { header: 'packet', value: (r) => r.stop.packet_id, whole: true },
        { header: 'project', value: (r) => r.stop.project },
        { header: 'why', value: (r) => r.stop.why },
        { header: 'run', value: (r) => r.stop.workflow_run_id, whole: true },
        { header: 'agent', value: (r) => r.stop.agent },
        { header: 'status', value: (r) => r.stop.status },
        { header: 'form', value: (r) => r.stop.next_form?.kind ?? '-' },
        { header: 'created', value: (r) => r.stop.created_at },
        { header: 'tried', value: (r) => r.stop.tried.join(', '), max: 30 },
      ],
      empty: 'no stop packets',
    });
  },
};
