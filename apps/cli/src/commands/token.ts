import { ActorNameSchema, ProjectIdSchema } from '@baton/contracts';
import {
  API_TOKEN_ID_PATTERN,
  API_TOKEN_ROLES,
  ApiTokenInputError,
  ApiTokenNameError,
  ApiTokenNameErrorCode,
  ApiTokenStore,
  apiTokenExpired,
  apiTokenInfo,
  parseTokenLifetime,
  readTokenKey,
  TOKEN_KEY_FILE_NAME,
  TOKEN_KEY_SETTING,
  TokenKeyError,
  TokenRevocationLog,
  TokenRevocationLogError,
  tokenRevocationStreamName,
  type ApiTokenInfo,
  type ApiTokenRole,
  type TokenKey,
} from '@baton/platform';
import type { NatsHandle } from '@baton/eventstore';
import type { Command, ParsedArgs } from '../command';
import { flag, parseCommandArgs, required } from '../command';
import type { CliContext } from '../context';
import { CliError, CliErrorCode, CliWarningCode, ExitCode, UsageError } from '../errors';
import { printJson, renderTable } from '../output';

/**
 * Operator tokens for the notifier's API and web inbox, written to Redis through the store the
 * notifier verifies them with (@baton/platform's ApiTokenStore; the format is
 * libs/platform/src/auth/api-token.ts) and signed with the deployment's token key: Redis is not
 * the authority, the key is (a file beside the admin's credentials; a notifier that holds it
 * refuses a record not signed with it). So `create`, `revoke` and `sign-existing` need the key
 * (`BATON_TOKEN_KEY_FILE`, or local.json's under npm start) and a Redis named, not the built-in
 * default; `list` reads with whatever it has. The secret itself is printed once and never stored.
 * A revocation (`revoke`, `create --rotate`, and those `sign-existing` finds only in Redis) is
 * appended first to the deployment's token revocation log, a JetStream stream only the admin's
 * credentials write (libs/platform/src/auth/token-revocations.ts): a Redis writer who puts back a
 * record from before the revocation does not lift it. Those commands need NATS too. `list` reads
 * that log too, when it has the key, to say of each token whether its revocation is there
 * ({@link TokenRevocationState}); it answers from Redis alone when the log cannot be read.
 */

/** The token key the command names (BATON_TOKEN_KEY_FILE, else local.json's), read; null when none is named. */
function namedTokenKey(ctx: CliContext): TokenKey | null {
  const named = ctx.tokenKeyFile();
  if (named === null) return null;
  try {
    return readTokenKey(named.file);
  } catch (error) {
    if (!(error instanceof TokenKeyError)) throw error;
    throw new UsageError(`${error.message} (named by ${named.from})`, false, {
      code: CliErrorCode.tokenKeyUnreadable,
      details: { file: named.file, from: named.from, reason: error.reason },
    });
  }
}

/**
 * The store a command that writes token records uses: with the deployment's token key (none named:
 * `token_key_missing`), on a Redis the environment or local.json names (the default, which may be
 * another deployment's: `default_server_write`). Both are checked before anything is written.
 */
async function signingStore(ctx: CliContext, command: string, options: { revocations?: boolean } = {}): Promise<ApiTokenStore> {
  const key = namedTokenKey(ctx);
  if (key === null)
    throw new UsageError(
      `${command} signs token records with the deployment's token key, and none is named: set ${TOKEN_KEY_SETTING} to the deployment's ${TOKEN_KEY_FILE_NAME} ` +
        `(beside the admin's credentials in the deployment folder: baton nats-config and npm start create it; docker compose: /auth/${TOKEN_KEY_FILE_NAME}). Nothing was written`,
      false,
      { code: CliErrorCode.tokenKeyMissing, details: { setting: TOKEN_KEY_SETTING } },
    );
  ctx.requireNamedServer('redis', command);
  let log: TokenRevocationLog | null = null;
  if (options.revocations === true) {
    ctx.requireNamedServer('nats', command);
    log = new TokenRevocationLog(await ctx.nats(), ctx.config().BATON_PREFIX, key);
    await recordingRevocations(() => log!.ensure());
  }
  return new ApiTokenStore((await ctx.redis()).client, ctx.config().BATON_PREFIX, key, log);
}

/**
 * Run a step that reads or appends to the token revocation log: a log that cannot be used is exit
 * 1 `token_revocation_unrecorded` (the log is written before Redis: nothing was written there).
 */
async function recordingRevocations<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (error) {
    if (!(error instanceof TokenRevocationLogError)) throw error;
    throw new CliError(`${error.message}. The revocation log is written before Redis: nothing was written to Redis; run it again once NATS answers`, {
      cause: error,
      code: CliErrorCode.tokenRevocationUnrecorded,
      details: { reason: error.reason },
    });
  }
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
  const rotate = flag(args, 'rotate');
  const store = await signingStore(ctx, 'token create', { revocations: rotate });
  let made: Awaited<ReturnType<ApiTokenStore['create']>>;
  try {
    made = await recordingRevocations(() =>
      store.create({
        name,
        role: role as ApiTokenRole,
        projects: all ? '*' : projects,
        createdBy: ctx.env['USER'] ?? 'baton-cli',
        now: new Date(now).toISOString(),
        ...(expiresAt !== null ? { expiresAt } : {}),
        ifNameTaken: rotate ? 'rotate' : 'refuse',
      }),
    );
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
  const store = await signingStore(ctx, 'token revoke', { revocations: true });
  const before = await store.get(id);
  if (before === null) throw new CliError(`no token ${id}`, { code: CliErrorCode.notFound, details: { token_id: id } });
  const already = before.revoked_at !== null;
  // Also for a token already revoked: its revocation may predate the log (the log keeps the first time).
  if (!(await recordingRevocations(() => store.revoke(id, new Date().toISOString()))))
    throw new CliError(`no token ${id}`, { code: CliErrorCode.notFound, details: { token_id: id } });
  const revokedAt = already ? before.revoked_at : ((await store.get(id))?.revoked_at ?? null);
  if (flag(args, 'json')) printJson(ctx.io, { token_id: id, name: before.name, revoked_at: revokedAt, already_revoked: already });
  else ctx.io.stdout.write(already ? `${id} was already revoked at ${revokedAt}; nothing changed\n` : `revoked ${id}\n`);
  return ExitCode.ok;
}

/**
 * `token sign-existing`: the migration of a deployment that had no token key. Signs every token
 * record that has no signature (each as it stands: the tokens the deployment trusted before keep
 * working once the notifier holds the key); records whose signature does not verify (altered, or
 * another key's) are reported, not signed. `--dry-run` lists what it would sign. Review the list:
 * a record someone wrote into Redis before the key existed is signed too — revoke what you do not
 * recognise.
 */
async function signExisting(args: ParsedArgs, ctx: CliContext): Promise<ExitCode> {
  const store = await signingStore(ctx, 'token sign-existing', { revocations: true });
  const dryRun = flag(args, 'dry-run');
  const result = await recordingRevocations(() => store.signExisting({ dryRun }));
  if (flag(args, 'json')) {
    printJson(ctx.io, { ...result, dry_run: dryRun });
    return ExitCode.ok;
  }
  const describe = (r: ApiTokenInfo) =>
    `${r.token_id} ${r.name} (${r.role}, ${r.projects === '*' ? 'all projects' : r.projects.join(',')}, created ${r.created_at}${r.created_by ? ` by ${r.created_by}` : ''}${r.revoked_at ? ', revoked' : ''})`;
  const out: string[] = [];
  out.push(`${dryRun ? 'would sign' : 'signed'} ${result.signed.length} token record(s)${result.signed.length > 0 ? ':' : ''}`);
  for (const r of result.signed) out.push(`  ${describe(r)}`);
  out.push(`${result.already_signed} signed already`);
  if (result.mismatched.length > 0) {
    out.push(`${result.mismatched.length} whose signature does not verify (altered, or signed with another key), left refused — revoke them:`);
    for (const r of result.mismatched) out.push(`  ${describe(r)}`);
  }
  if (result.revocations_recorded.length > 0)
    out.push(
      `${dryRun ? 'would record' : 'recorded'} ${result.revocations_recorded.length} revocation(s) in the revocation log that only Redis held: ${result.revocations_recorded.join(', ')}`,
    );
  if (result.changed.length > 0) out.push(`${result.changed.length} changed while signing (left as they were; run it again): ${result.changed.join(', ')}`);
  ctx.io.stdout.write(`${out.join('\n')}\n`);
  return ExitCode.ok;
}

/**
 * A token's revocation as `token list` shows it: its record in Redis and the deployment's token
 * revocation log, which the notifier trusts whatever Redis says, compared.
 * - `not_revoked`: neither says it is revoked;
 * - `in_log`: revoked, and the log has it (a record from before the revocation, put back into
 *   Redis, is still refused);
 * - `redis_only`: Redis says revoked, the log has no entry for it — revoked before the deployment
 *   had the log, or with a CLI from before it: whoever can write Redis can lift it by putting an
 *   earlier record back. `baton token sign-existing` copies such revocations into the log
 *   (`baton token revoke <id>` for one token, also one whose signature is `mismatch`, which
 *   sign-existing leaves alone);
 * - `rolled_back`: the log says revoked and the record in Redis says active (a record from before
 *   the revocation was put back): the notifier refuses it; `baton token revoke <id>` marks the
 *   record revoked again;
 * - `unknown`: the log could not be read ({@link RevocationUnknownReason}); `revoked_at` is Redis's alone.
 */
export type TokenRevocationState = 'not_revoked' | 'in_log' | 'redis_only' | 'rolled_back' | 'unknown';

/**
 * Why `token list` could not read what the revocation log says of a token (`revocation_unknown_reason`):
 * - `token_key_missing`: no token key is named — the log's entries are signed with it, and an
 *   entry that cannot be checked counts for nothing (the notifier ignores one that does not verify);
 * - `unavailable`: NATS could not be reached, or the log read did not answer in time;
 * - `jetstream_unavailable`: NATS answered, JetStream did not (no leader, not enabled);
 * - `unauthenticated`: NATS refused the credentials (`NATS_CREDS`);
 * - `permission_denied`: the credentials may not read the log (not the admin's, or issued before
 *   the log: `baton nats-config` issues them again);
 * - `too_many_unsigned`: the log holds more entries for the token than it reads that do not verify.
 * A log stream that does not exist is not a failure: it holds no revocation.
 */
export type RevocationUnknownReason =
  | 'token_key_missing'
  | 'unavailable'
  | 'jetstream_unavailable'
  | 'unauthenticated'
  | 'permission_denied'
  | 'too_many_unsigned';

/** The failures of the NATS connection (`CliContext.nats`) that are a reason of their own; any other is `unavailable`. */
const CONNECT_REASONS: ReadonlySet<string> = new Set([CliErrorCode.jetstreamUnavailable, CliErrorCode.unauthenticated]);

/** What the revocation log says of one token: when it was revoked there (null: no entry), or why that is not known. */
type LogAnswer = { loggedAt: string | null } | { unknown: RevocationUnknownReason };

/** What `token list` read of the revocation log. */
interface RevocationLogRead {
  answers: Map<string, LogAnswer>;
  /** The log could not be read (for some tokens, or all): why, as a person reads it. */
  unread: { reason: RevocationUnknownReason; message: string } | null;
  /** The stream does not exist (the notifier makes it at its start, the first revocation too): it holds nothing. */
  missing: boolean;
}

/** Lookups of the log `token list` has in flight at once (one direct get each). */
const LOG_LOOKUPS_AT_ONCE = 16;

/**
 * Ask the deployment's token revocation log about each token (its one reader,
 * {@link TokenRevocationLog.revokedAt}: a direct get on the token's subject, entries checked with
 * the token key). Reads only: the stream is never made here. The first token is asked alone, so a
 * log that cannot be read costs one round trip (or one timeout), not one per token; what could not
 * be read is answered `unknown` with its reason, and what was read stands.
 */
async function readRevocationLog(ctx: CliContext, key: TokenKey | null, tokenIds: readonly string[]): Promise<RevocationLogRead> {
  const read: RevocationLogRead = { answers: new Map(), unread: null, missing: false };
  const unknownAll = (reason: RevocationUnknownReason, message: string): RevocationLogRead => {
    for (const id of tokenIds) read.answers.set(id, { unknown: reason });
    return { ...read, unread: { reason, message } };
  };
  if (tokenIds.length === 0) return read;
  if (key === null)
    return unknownAll(
      'token_key_missing',
      `no token key is named (${TOKEN_KEY_SETTING}): the log's entries are signed with it and cannot be checked without it`,
    );
  let nats: NatsHandle;
  try {
    nats = await ctx.nats();
  } catch (error) {
    if (!(error instanceof CliError)) throw error;
    return unknownAll(CONNECT_REASONS.has(error.code) ? (error.code as RevocationUnknownReason) : 'unavailable', error.message);
  }
  const log = new TokenRevocationLog(nats, ctx.config().BATON_PREFIX, key);
  const ask = async (tokenId: string): Promise<void> => {
    try {
      read.answers.set(tokenId, { loggedAt: await log.revokedAt(tokenId) });
    } catch (error) {
      if (!(error instanceof TokenRevocationLogError)) throw error;
      if (error.reason === 'stream_missing') read.missing = true;
      else if (error.reason === 'too_many_unsigned') {
        // That token's entries do not verify: unknown for it alone, the others are read on.
        read.answers.set(tokenId, { unknown: error.reason });
        read.unread ??= { reason: error.reason, message: error.message };
      } else read.unread = { reason: error.reason, message: error.message };
    }
  };
  const [first, ...rest] = tokenIds;
  if (first !== undefined) await ask(first);
  for (let from = 0; from < rest.length && !read.missing && (read.unread === null || read.unread.reason === 'too_many_unsigned'); from += LOG_LOOKUPS_AT_ONCE)
    await Promise.all(rest.slice(from, from + LOG_LOOKUPS_AT_ONCE).map(ask));
  if (read.missing) {
    for (const id of tokenIds) read.answers.set(id, { loggedAt: null });
    return { ...read, unread: null };
  }
  const unread = read.unread;
  if (unread !== null) for (const id of tokenIds) if (!read.answers.has(id)) read.answers.set(id, { unknown: unread.reason });
  return read;
}

/** A token's revocation state from its record in Redis and the log's answer ({@link TokenRevocationState}). */
function revocationOf(
  record: ApiTokenInfo,
  answer: LogAnswer | undefined,
): {
  revocation: TokenRevocationState;
  revocation_logged_at: string | null;
  revocation_unknown_reason: RevocationUnknownReason | null;
} {
  if (answer === undefined || 'unknown' in answer)
    return { revocation: 'unknown', revocation_logged_at: null, revocation_unknown_reason: answer?.unknown ?? 'unavailable' };
  const revoked = record.revoked_at !== null;
  const revocation: TokenRevocationState = answer.loggedAt !== null ? (revoked ? 'in_log' : 'rolled_back') : revoked ? 'redis_only' : 'not_revoked';
  return { revocation, revocation_logged_at: answer.loggedAt, revocation_unknown_reason: null };
}

/** How the table's `revocation` column says each state. */
const REVOCATION_WORDS: Record<TokenRevocationState, string> = {
  not_revoked: 'not revoked',
  in_log: 'in the log',
  redis_only: 'Redis only',
  rolled_back: 'in the log; Redis says active',
  unknown: 'unknown',
};

/**
 * `token list`: every token of the token set with its signature and its revocation state (the
 * record in Redis against the revocation log). Reads Redis with whatever key it has, and the log
 * over NATS when a key is named; a log that cannot be read leaves the list answering from Redis,
 * each token's revocation `unknown` with its reason (exit 0, as the other reads that answer from
 * what they could read).
 */
async function listTokens(args: ParsedArgs, ctx: CliContext): Promise<ExitCode> {
  const key = namedTokenKey(ctx);
  const store = new ApiTokenStore((await ctx.redis()).client, ctx.config().BATON_PREFIX, key);
  const stored = await store.records();
  const log = await readRevocationLog(
    ctx,
    key,
    stored.map((r) => r.token_id),
  );
  const now = Date.now();
  const records = stored.map((r) => {
    const info = apiTokenInfo(r);
    return { ...info, signature: store.signatureOf(r), ...revocationOf(info, log.answers.get(r.token_id)) };
  });
  warnSharedNames(ctx, records, now);
  if (flag(args, 'json')) {
    printJson(
      ctx.io,
      records.map((r) => ({ ...r, expires_at: r.expires_at ?? null, expired: apiTokenExpired(r, now) })),
    );
    return ExitCode.ok;
  }
  const out = [
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
        { header: 'signature', value: (r) => r.signature },
        { header: 'revocation', value: (r) => REVOCATION_WORDS[r.revocation] },
      ],
      'no tokens',
    ),
  ];
  const stream = tokenRevocationStreamName(ctx.config().BATON_PREFIX);
  const ids = (state: TokenRevocationState) => records.filter((r) => r.revocation === state).map((r) => r.token_id);
  const redisOnly = ids('redis_only');
  if (redisOnly.length > 0) {
    const mismatched = records.filter((r) => r.revocation === 'redis_only' && r.signature === 'mismatch').map((r) => r.token_id);
    out.push(
      `note: ${redisOnly.length} revocation(s) are in Redis only, not in the revocation log ${stream} (made before the deployment had the log): ` +
        `whoever can write Redis can lift them by putting an earlier record back. Copy them into the log: baton token sign-existing` +
        (mismatched.length > 0 ? ` (it leaves records whose signature is mismatch: baton token revoke ${mismatched.join(', ')})` : '') +
        '\n',
    );
  }
  const rolledBack = ids('rolled_back');
  if (rolledBack.length > 0)
    out.push(
      `note: the revocation log says ${rolledBack.join(', ')} revoked while Redis says active (a record from before the revocation was put back): ` +
        `the notifier refuses them; mark them revoked again with baton token revoke <token_id>\n`,
    );
  if (log.missing) out.push(`note: the revocation log ${stream} does not exist (the notifier makes it at its start): it holds no revocation\n`);
  if (log.unread !== null) {
    const unknown = ids('unknown');
    out.push(
      `note: revocation log unknown (${log.unread.reason})${unknown.length < records.length ? ` for ${unknown.join(', ')}` : ''}: ${log.unread.message}; ` +
        `the revoked column says what Redis holds, not whether the log has it\n`,
    );
  }
  ctx.io.stdout.write(out.join(''));
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

const JSON_OPTION = { json: { type: 'boolean' } } as const;

/** The options (and how many positional arguments) each `token` subcommand takes; any other is a usage error. */
const TOKEN_OPTIONS: Readonly<Record<string, { options: Parameters<typeof parseCommandArgs>[1]; positionals: number }>> = {
  create: {
    options: {
      role: { type: 'string' },
      project: { type: 'string', multiple: true },
      'all-projects': { type: 'boolean' },
      name: { type: 'string' },
      rotate: { type: 'boolean' },
      'expires-in': { type: 'string' },
      'expires-at': { type: 'string' },
      ...JSON_OPTION,
    },
    positionals: 0,
  },
  list: { options: JSON_OPTION, positionals: 0 },
  revoke: { options: JSON_OPTION, positionals: 1 },
  'sign-existing': { options: { 'dry-run': { type: 'boolean' }, ...JSON_OPTION }, positionals: 0 },
};

export const tokenCommand: Command = {
  name: 'token',
  summary: 'create, list, revoke or sign operator API tokens (roles viewer / operator / admin, per project)',
  help: `Usage: baton token create --role viewer|operator|admin (--project p ... | --all-projects) [--name who] [--rotate] [--expires-in 30d | --expires-at ISO] [--json]
       baton token list [--json]
       baton token revoke <token_id> [--json]
       baton token sign-existing [--dry-run] [--json]

Tokens authenticate the notifier's operator API (Authorization: Bearer <token>) and its web inbox
(paste the token on /login). They are stored hashed in Redis under <BATON_PREFIX>:auth:; the token
itself is printed once, on stdout, and cannot be shown again.

Each record is signed with the deployment's token key (HMAC-SHA256), a file beside the admin's
credentials (<deployment folder>/token.key: baton nats-config and npm start create it), and a
notifier started with it refuses a record that is not (401 unsigned): Redis alone cannot make a
token. create, revoke and sign-existing need the key — BATON_TOKEN_KEY_FILE, else the one
local.json names under npm start (none: exit 2, token_key_missing; unreadable: token_key_unreadable)
— and a Redis named by REDIS_URL or local.json (the built-in default, which may be another
deployment's: exit 2, default_server_write). Nothing is written then.

Revocations are final: revoke (and create --rotate) first append a signed entry to the
deployment's token revocation log, a JetStream stream (<PREFIX>_TOKEN_REVOCATIONS) only the admin's
NATS credentials may write, then mark the record in Redis. A notifier holding the key refuses a
token the log names (401 revoked) whatever Redis says — a record from before the revocation put
back, a Redis restored from a backup — and refuses every token while it cannot read the log
(401 revocations_unavailable). These commands need NATS (NATS_URL, NATS_CREDS: the admin's); a
log that cannot be written is exit 1, token_revocation_unrecorded, and nothing is written to Redis.
A token's role, projects and expiry never change: to narrow one, create --rotate a new one.

sign-existing is the upgrade of a deployment whose tokens were made before it had a key: it signs
every record that has none, as it stands (review them first: token list shows signature unsigned;
revoke what you do not recognise), and reports records whose signature does not verify (altered,
or signed with another key) without signing them. It also appends to the revocation log every
revocation only Redis holds (made before the log existed): revocations_recorded.

list shows, besides each record's signature, its revocation as the notifier sees it, the record
in Redis against the revocation log (the revocation column):
  not revoked                     neither says it is revoked
  in the log                      revoked, and the log has it
  Redis only                      revoked before the log existed: a Redis writer can lift it by
                                  putting an earlier record back; sign-existing copies it into the log
  in the log; Redis says active   a record from before the revocation was put back: the notifier
                                  refuses it; revoke it again to mark the record
  unknown                         the log cannot be read: no key named, NATS down, credentials
                                  that may not read it; the list still answers from Redis, says
                                  why in a note line (--json: revocation_unknown_reason), exit 0
list reads the log with the key and NATS_CREDS (the admin's), and never writes it.

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
                     token_name_reserved). It may be an agent's name: the ledger keeps whoever did
                     a handoff's work from deciding it by kind and name (a person is not the agent),
                     except on handbacks recorded before the kind was, where the name alone counts
  --rotate           the name's active tokens are revoked as this one is made (a new secret for
                     the same person)
  --expires-in <d>   the token expires after this long: a number and s, m, h, d or w (30d, 12h, 90m)
  --expires-at <t>   the token expires at this ISO time (2027-01-31T18:00:00Z)
  --json             print { token, token_id, name, role, projects, created_at, expires_at, rotated }
                     (rotated: the ids --rotate revoked)

Options (list, revoke, sign-existing):
  --json             list: the tokens as a JSON array (each with expires_at, expired and signature:
                     valid, unsigned, mismatch, or unchecked when no key is named; revocation:
                     not_revoked, in_log, redis_only, rolled_back or unknown, revocation_logged_at:
                     the log's time or null, revocation_unknown_reason: null, or token_key_missing,
                     unavailable, jetstream_unavailable, unauthenticated, permission_denied,
                     too_many_unsigned);
                     revoke: { token_id, name, revoked_at, already_revoked } — already_revoked true
                     when it had been revoked before (nothing changed; revoked_at is that time);
                     sign-existing: { signed, already_signed, mismatched, changed,
                     revocations_recorded, dry_run }
  --dry-run          sign-existing: list what it would sign, write nothing
`,
  async run(argv, ctx) {
    const [sub, ...rest] = argv;
    if (sub === undefined || sub === '--help' || sub === '-h') {
      ctx.io.stdout.write(this.help);
      return sub === undefined ? ExitCode.usage : ExitCode.ok;
    }
    const taken = TOKEN_OPTIONS[sub];
    if (taken === undefined) throw new UsageError(`unknown subcommand "${sub}" (create, list, revoke, sign-existing)`);
    // Each subcommand takes its own options only: `revoke <id> --dry-run` is refused, never a revocation.
    const args = parseCommandArgs(rest, taken.options, { min: 0, max: taken.positionals });
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    switch (sub) {
      case 'create':
        return create(args, ctx);
      case 'list':
        return listTokens(args, ctx);
      case 'revoke':
        return revoke(args, ctx);
      case 'sign-existing':
        return signExisting(args, ctx);
      default:
        throw new UsageError(`unknown subcommand "${sub}" (create, list, revoke, sign-existing)`);
    }
  },
};
