import { ActorNameSchema, ProjectIdSchema } from '@baton/contracts';
import {
  API_TOKEN_ID_PATTERN,
  API_TOKEN_ROLES,
  ApiTokenInputError,
  ApiTokenNameError,
  ApiTokenNameErrorCode,
  ApiTokenStore,
  apiTokenExpired,
  parseTokenLifetime,
  type ApiTokenInfo,
  type ApiTokenRole,
} from '@baton/platform';
import type { Command, ParsedArgs } from '../command';
import { flag, parseCommandArgs, required } from '../command';
import type { CliContext } from '../context';
import { CliError, CliErrorCode, CliWarningCode, ExitCode, UsageError } from '../errors';
import { printJson, renderTable } from '../output';

/**
 * Operator tokens for the notifier's API and web inbox, written straight to Redis (whoever can
 * write the deployment's Redis is an admin already) through the store the notifier verifies them
 * with (@baton/platform's ApiTokenStore; the format is libs/platform/src/auth/api-token.ts). The
 * secret itself is printed once and never stored.
 */

async function tokenStore(ctx: CliContext): Promise<ApiTokenStore> {
  return new ApiTokenStore((await ctx.redis()).client, ctx.config().BATON_PREFIX);
}

function list(args: ParsedArgs, name: string): string[] {
  const value = args.values[name];
  if (value === undefined) return [];
  return (Array.isArray(value) ? value : [value])
    .flatMap((v) => String(v).split(','))
    .map((v) => v.trim())
    .filter(Boolean);
}

async function create(args: ParsedArgs, ctx: CliContext): Promise<ExitCode> {
  const role = required(args, 'role');
  if (!API_TOKEN_ROLES.includes(role as ApiTokenRole)) throw new UsageError(`--role must be viewer, operator or admin, got "${role}"`);
  // A token's name is a person's identity: never the `operator` placeholder other commands fall back to.
  const name = (args.values['name'] as string | undefined) ?? ctx.namedOperator();
  if (name === undefined) throw new UsageError('--name: give the name of the person the token is for (neither BATON_OPERATOR nor USER names anyone)');
  if (!ActorNameSchema.safeParse(name).success) throw new UsageError(`--name may hold letters, digits and _ - . : @ only (1-128), got "${name}"`);
  const projects = list(args, 'project');
  if (flag(args, 'all-projects') && projects.length > 0) throw new UsageError('give --project <p> (repeatable) or --all-projects, not both');
  // An admin acts on every project: a --project would read as a limit the token does not have.
  if (role === 'admin' && projects.length > 0)
    throw new UsageError('an admin token acts on every project; --project cannot limit it (make an operator token for one project)');
  const all = flag(args, 'all-projects') || role === 'admin';
  for (const project of projects)
    if (!ProjectIdSchema.safeParse(project).success) throw new UsageError(`--project "${project}" is not a project key (lowercase letters, digits, _ and -)`);
  if (!all && projects.length === 0) throw new UsageError('a viewer or operator token needs --project <p> (repeatable) or --all-projects');
  const now = Date.now();
  const expiresAt = expiryOf(args, now);
  let made: Awaited<ReturnType<ApiTokenStore['create']>>;
  try {
    made = await (
      await tokenStore(ctx)
    ).create({
      name,
      role: role as ApiTokenRole,
      projects: all ? '*' : projects,
      createdBy: ctx.env['USER'] ?? 'baton-cli',
      now: new Date(now).toISOString(),
      ...(expiresAt !== null ? { expiresAt } : {}),
      ifNameTaken: flag(args, 'rotate') ? 'rotate' : 'refuse',
    });
  } catch (error) {
    // A name Baton's own actors use is a mistake in the command line (exit 2); a name an active
    // token has is the deployment's state (exit 1): revoke that token, choose another name, or --rotate.
    if (error instanceof ApiTokenNameError && error.code === ApiTokenNameErrorCode.reserved)
      throw new UsageError(`--name: ${error.message}`, true, { code: CliErrorCode.tokenNameReserved, details: error.details });
    if (error instanceof ApiTokenNameError)
      throw new CliError(`--name: ${error.message}${error.details.token_ids ? ' (`baton token create --rotate` revokes it and makes the new one)' : ''}`, {
        code: CliErrorCode.tokenNameTaken,
        details: error.details,
      });
    if (!(error instanceof ApiTokenInputError)) throw error;
    // The store's rules, said in the flags' words.
    const flagOf: Record<string, string> = { name: '--name', projects: '--project', expires_at: '--expires-at' };
    throw new UsageError(error.issues.map((issue) => `${flagOf[issue.field.split('.')[0] ?? ''] ?? issue.field}: ${issue.message}`).join('; '));
  }
  const { token, info, rotated } = made;
  if (flag(args, 'json')) {
    printJson(ctx.io, {
      token,
      token_id: info.token_id,
      name: info.name,
      role: info.role,
      projects: info.projects,
      created_at: info.created_at,
      expires_at: info.expires_at ?? null,
      rotated,
    });
  } else {
    ctx.io.stdout.write(`${token}\n`);
    if (rotated.length > 0) ctx.io.stderr.write(`revoked ${rotated.join(', ')} (rotated: the name ${info.name} is this token's now)\n`);
    ctx.io.stderr.write(
      `token ${info.token_id} for ${info.name} (${info.role}, ${info.projects === '*' ? 'all projects' : `projects ${info.projects.toString()}`}${info.expires_at ? `, expires ${info.expires_at}` : ''}); it is shown only now — keep it secret\n`,
    );
  }
  return ExitCode.ok;
}

/**
 * `token revoke <token_id>`: the token stops authenticating at once. Revoking one already revoked
 * changes nothing and says so (exit 0, `already_revoked: true` with its first revocation time).
 */
async function revoke(args: ParsedArgs, ctx: CliContext): Promise<ExitCode> {
  const id = args.positionals[0];
  if (id === undefined) throw new UsageError('missing <token_id>');
  // A token id is 16 hex digits (`baton token list`): anything else is a mistyped argument, not a missing token.
  if (!API_TOKEN_ID_PATTERN.test(id))
    throw new UsageError(`<token_id> is 16 hex digits (as \`baton token list\` shows it), got "${id}"`, true, { code: 'usage', details: { token_id: id } });
  const store = await tokenStore(ctx);
  const before = await store.get(id);
  if (before === null) throw new CliError(`no token ${id}`, { code: CliErrorCode.notFound, details: { token_id: id } });
  const already = before.revoked_at !== null;
  if (!already && !(await store.revoke(id, new Date().toISOString())))
    throw new CliError(`no token ${id}`, { code: CliErrorCode.notFound, details: { token_id: id } });
  const revokedAt = already ? before.revoked_at : ((await store.get(id))?.revoked_at ?? null);
  if (flag(args, 'json')) printJson(ctx.io, { token_id: id, name: before.name, revoked_at: revokedAt, already_revoked: already });
  else ctx.io.stdout.write(already ? `${id} was already revoked at ${revokedAt}; nothing changed\n` : `revoked ${id}\n`);
  return ExitCode.ok;
}

/**
 * Warn of active tokens (not revoked, not expired) that share a name, any case: `token create`
 * refuses a second one since names were checked, but tokens made before stay — and the name is all
 * a recorded answer says of who answered, so their answers read as one person's. Revoke all but
 * one, or `token create --rotate` the name.
 */
function warnSharedNames(ctx: CliContext, records: readonly ApiTokenInfo[], now: number): void {
  const byName = new Map<string, ApiTokenInfo[]>();
  for (const record of records) {
    if (record.revoked_at !== null || apiTokenExpired(record, now)) continue;
    const key = record.name.toLowerCase();
    byName.set(key, [...(byName.get(key) ?? []), record]);
  }
  for (const found of byName.values()) {
    if (found.length < 2) continue;
    // The store's set is unordered: oldest first, then by id, so the warning reads the same every time.
    const shared = [...found].sort((a, b) => a.created_at.localeCompare(b.created_at) || a.token_id.localeCompare(b.token_id));
    const ids = shared.map((r) => r.token_id);
    const names = [...new Set(shared.map((r) => r.name))].join(' / ');
    ctx.warn(
      CliWarningCode.tokenNameShared,
      `active tokens ${ids.join(', ')} share the name ${names}: their answers are recorded as one person's; revoke all but one, or \`baton token create --name ${shared[0]?.name ?? ''} --rotate\``,
      undefined,
      { name: shared[0]?.name, token_ids: ids },
    );
  }
}

/** The expiry `--expires-in <n><s|m|h|d|w>` or `--expires-at <ISO time>` asks for (ISO), or null (never). */
function expiryOf(args: ParsedArgs, now: number): string | null {
  const within = args.values['expires-in'];
  const at = args.values['expires-at'];
  if (typeof within === 'string' && typeof at === 'string') throw new UsageError('give --expires-in or --expires-at, not both');
  if (typeof within === 'string') {
    const ms = parseTokenLifetime(within);
    if (ms === null) throw new UsageError(`--expires-in takes a number and a unit s, m, h, d or w (e.g. 30d, 12h), got "${within}"`);
    return new Date(now + ms).toISOString();
  }
  if (typeof at === 'string') {
    const ms = Date.parse(at);
    if (!Number.isFinite(ms) || !/^\d{4}-\d{2}-\d{2}/.test(at)) throw new UsageError(`--expires-at takes an ISO time (e.g. 2027-01-31T18:00:00Z), got "${at}"`);
    if (ms <= now) throw new UsageError(`--expires-at ${at} is not in the future`);
    return new Date(ms).toISOString();
  }
  return null;
}

export const tokenCommand: Command = {
  name: 'token',
  summary: 'create, list or revoke operator API tokens (roles viewer / operator / admin, per project)',
  help: `Usage: baton token create --role viewer|operator|admin (--project p ... | --all-projects) [--name who] [--rotate] [--expires-in 30d | --expires-at ISO] [--json]
       baton token list [--json]
       baton token revoke <token_id> [--json]

Tokens authenticate the notifier's operator API (Authorization: Bearer <token>) and its web inbox
(paste the token on /login). They are stored hashed in Redis under <BATON_PREFIX>:auth:; the token
itself is printed once, on stdout, and cannot be shown again.

Roles: viewer reads; operator reads and answers; admin does both for every project. A viewer or
operator sees and answers only the projects it was created for. A token made with an expiry
stops authenticating then (the API answers 401; its browser sessions and live streams end);
\`token list\` shows the expiry and marks expired tokens.

Options (create):
  --role <role>      viewer, operator or admin (required)
  --project <p>      a project the token may use (repeat, or comma-separate)
  --all-projects     every project (admins always have it)
  --name <who>       the operator's name, recorded as answered_by (default: BATON_OPERATOR or $USER;
                     neither set: required).
                     It is who acted in every record, so it is unique among active tokens (another
                     active token of that name, any case: exit 1, token_name_taken) and never a
                     name Baton's own actors use (baton-*, admin, system, project-client, customer,
                     engine_fallback, operator, router, ledger, watchdog, notifier: exit 2,
                     token_name_reserved). Best not an agent's name: the ledger keeps whoever did a
                     handoff's work, person or agent, from accepting or reviewing it by name, so a
                     token named like an agent cannot decide on that agent's work (self_accept_forbidden)
  --rotate           the name's active tokens are revoked as this one is made (a new secret for
                     the same person)
  --expires-in <d>   the token expires after this long: a number and s, m, h, d or w (30d, 12h, 90m)
  --expires-at <t>   the token expires at this ISO time (2027-01-31T18:00:00Z)
  --json             print { token, token_id, name, role, projects, created_at, expires_at, rotated }
                     (rotated: the ids --rotate revoked)

Options (list, revoke):
  --json             list: the tokens as a JSON array (each with expires_at and expired);
                     revoke: { token_id, name, revoked_at, already_revoked } — already_revoked true
                     when it had been revoked before (nothing changed; revoked_at is that time)
`,
  async run(argv, ctx) {
    const [sub, ...rest] = argv;
    const args = parseCommandArgs(
      rest,
      {
        role: { type: 'string' },
        project: { type: 'string', multiple: true },
        'all-projects': { type: 'boolean' },
        name: { type: 'string' },
        rotate: { type: 'boolean' },
        'expires-in': { type: 'string' },
        'expires-at': { type: 'string' },
        json: { type: 'boolean' },
      },
      { min: 0, max: 1 },
    );
    if (args.help || sub === undefined || sub === '--help' || sub === '-h') {
      ctx.io.stdout.write(this.help);
      return sub === undefined ? ExitCode.usage : ExitCode.ok;
    }
    switch (sub) {
      case 'create':
        return create(args, ctx);
      case 'list': {
        const records = await (await tokenStore(ctx)).list();
        const now = Date.now();
        warnSharedNames(ctx, records, now);
        if (flag(args, 'json'))
          printJson(
            ctx.io,
            records.map((r) => ({ ...r, expires_at: r.expires_at ?? null, expired: apiTokenExpired(r, now) })),
          );
        else
          ctx.io.stdout.write(
            renderTable(
              records,
              [
                { header: 'token_id', value: (r) => r.token_id },
                { header: 'name', value: (r) => r.name },
                { header: 'role', value: (r) => r.role },
                { header: 'projects', value: (r) => (r.projects === '*' ? '*' : r.projects.join(',')) },
                { header: 'created', value: (r) => r.created_at },
                { header: 'expires', value: (r) => (r.expires_at ? `${r.expires_at}${apiTokenExpired(r, now) ? ' (expired)' : ''}` : 'never') },
                { header: 'revoked', value: (r) => r.revoked_at ?? '-' },
              ],
              'no tokens',
            ),
          );
        return ExitCode.ok;
      }
      case 'revoke':
        return revoke(args, ctx);
      default:
        throw new UsageError(`unknown subcommand "${sub}" (create, list, revoke)`);
    }
  },
};
