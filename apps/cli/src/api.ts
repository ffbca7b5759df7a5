import { randomUUID } from 'node:crypto';
import { str, type ParsedArgs } from './command';
import type { CliContext } from './context';
import { CliError, CliErrorCode, ExitCode, type CliIssue } from './errors';
import { printJson } from './output';
import { ambiguousId, projectArg } from './timeline';

/** A reply of the operator API: its status and parsed JSON body (null when empty or not JSON). */
export interface ApiReply {
  status: number;
  ok: boolean;
  body: unknown;
}

/** How long the CLI waits for the operator API: a read, and a POST (an answer waits for its outcome on the server). */
export const GET_TIMEOUT_MS = 15_000;
export const POST_TIMEOUT_MS = 75_000;

/**
 * The idempotency key a POST carries. When the POST times out, the failure names it (message and
 * `details`): the CLI may have made it up (`cli-<uuid>` when the option was not given), and the
 * operator can send the request again safely only with that same key.
 */
export interface RetryKey {
  /** The command-line option that sets it (`--answer-id`, `--key`). */
  option: string;
  /** Its field in the request body, and its key in the failure's `details` (`answer_id`, `idempotency_key`). */
  field: string;
  value: string;
}

/**
 * Call the notifier's operator API at BATON_API_URL. Resolves with any HTTP status (the caller
 * maps refusals); throws {@link CliError} only when the API cannot be reached.
 */
export async function callApi(ctx: CliContext, method: 'GET' | 'POST', path: string, body?: unknown, retryKey?: RetryKey): Promise<ApiReply> {
  const base = ctx.config().BATON_API_URL.replace(/\/+$/, '');
  const url = `${base}${path}`;
  const token = ctx.config().BATON_TOKEN;
  // An answer waits for the router's decision on the server (NOTIFIER_ANSWER_WAIT_MS, at most 60 s).
  const timeoutMs = method === 'POST' ? POST_TIMEOUT_MS : GET_TIMEOUT_MS;
  let response: Response;
  try {
    response = await ctx.fetch(url, {
      method,
      headers: {
        accept: 'application/json',
        ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (error) {
    if ((error as Error).name === 'TimeoutError') {
      const safely = retryKey !== undefined ? ` (sending it again with ${retryKey.option} ${retryKey.value} is safe: it is carried out once)` : '';
      const maybeDone = method === 'POST' ? `: it may have been carried out — check before sending it again${safely}` : '';
      throw new CliError(`the operator API at ${base} did not answer ${method} ${path} within ${timeoutMs / 1000} s${maybeDone}`, {
        cause: error,
        code: method === 'POST' ? CliErrorCode.outcomeUnknown : CliErrorCode.unavailable,
        ...(method === 'POST' && retryKey !== undefined ? { details: { [retryKey.field]: retryKey.value } } : {}),
      });
    }
    throw new CliError(`cannot reach the operator API at ${base}: ${(error as Error).message} (is the notifier running? set BATON_API_URL)`, {
      cause: error,
      code: CliErrorCode.unavailable,
    });
  }
  const text = await response.text();
  let parsed: unknown = null;
  try {
    parsed = text.length > 0 ? JSON.parse(text) : null;
  } catch {
    parsed = text;
  }
  return { status: response.status, ok: response.ok, body: parsed };
}

/** The human message of an API error body (`{ error: { code, message } }`, `{ message }`...). */
export function apiErrorText(reply: ApiReply): string {
  const body = reply.body as { error?: { code?: unknown; message?: unknown } | string; message?: unknown; code?: unknown } | null;
  if (body && typeof body === 'object') {
    const error = body.error;
    if (error && typeof error === 'object') return `${String(error.code ?? reply.status)}: ${String(error.message ?? '')}`;
    if (typeof error === 'string') return `${reply.status}: ${typeof body.message === 'string' ? body.message : error}`;
    if (typeof body.message === 'string') return `${String(body.code ?? reply.status)}: ${body.message}`;
  }
  return `HTTP ${reply.status}${typeof reply.body === 'string' ? `: ${reply.body.slice(0, 200)}` : ''}`;
}

/**
 * What an answer's reply says happened, for people: `applied <what>; run <id> is now <status>`
 * (200), or `sent <what>; not applied yet … check <status_url>` (202: the router had not decided
 * within the API's wait). Refusals are errors (the caller prints their code and exits 1).
 */
export function answerOutcomeText(reply: ApiReply, what: string): string {
  const body = (reply.body ?? {}) as {
    outcome?: unknown;
    status_url?: unknown;
    workflow_run_id?: unknown;
    mesh_run_id?: unknown;
    run?: { status?: unknown } | null;
    mesh?: { status?: unknown } | null;
    duplicate?: unknown;
    event?: { seq?: unknown } | null;
  };
  if (reply.status === 202 || body.outcome === 'pending') {
    const link = typeof body.status_url === 'string' ? ` (GET ${body.status_url} for the outcome)` : '';
    return `sent ${what}; not applied yet: the router has not decided it${link}`;
  }
  const status = body.mesh?.status ?? body.run?.status;
  const of =
    typeof body.mesh_run_id === 'string' ? `mesh ${body.mesh_run_id}` : typeof body.workflow_run_id === 'string' ? `run ${body.workflow_run_id}` : null;
  const now = of !== null && typeof status === 'string' ? `; ${of} is now ${status}` : '';
  // The same answer sent again: its earlier outcome, nothing new was done (a new hold or packet stays open).
  if (body.duplicate === true) {
    const at = typeof body.event?.seq === 'number' ? ` at seq ${body.event.seq}` : '';
    return `already applied ${what} (this answer id was applied before${at}; nothing new was done)${now}`;
  }
  return `applied ${what}${now}`;
}

/**
 * The path of a run, handoff or stop packet: the project route when the project is known
 * (`/v1/projects/<p>/<kind>s/<id>`), else the id-only route (which the API answers only when the
 * id is unambiguous among the token's projects).
 */
export function recordPath(kind: 'runs' | 'handoffs' | 'stops', id: string, project: string | undefined, suffix = ''): string {
  const base = project !== undefined ? `/v1/projects/${encodeURIComponent(project)}/${kind}` : `/v1/${kind}`;
  return `${base}/${encodeURIComponent(id)}${suffix}`;
}

/**
 * A 409 `ambiguous_id` reply (the id exists in several of the token's projects) as the usage
 * error that names them and asks for --project; any other reply is left to the caller.
 */
export function throwIfAmbiguous(reply: ApiReply, what: string, id: string): void {
  if (reply.status !== 409) return;
  const error = (reply.body as { error?: { code?: unknown; details?: { projects?: unknown } } } | null)?.error;
  if (error?.code !== 'ambiguous_id') return;
  const projects = Array.isArray(error.details?.projects) ? error.details.projects.map(String) : [];
  throw ambiguousId(what, id, projects);
}

/**
 * The API's refusal as the command's failure: the code the API answered with (or `http_<status>`
 * for a body without one), its message, issues and details, and the HTTP status in `details`.
 */
export function apiRefusal(reply: ApiReply, what: string): CliError {
  const error = (reply.body as { error?: { code?: unknown; issues?: unknown; details?: unknown } } | null)?.error;
  const code = typeof error?.code === 'string' ? error.code : `http_${reply.status}`;
  const issues = Array.isArray(error?.issues)
    ? error.issues.filter((i): i is CliIssue => typeof i === 'object' && i !== null && typeof i.path === 'string' && typeof i.message === 'string')
    : [];
  const details = typeof error?.details === 'object' && error.details !== null ? (error.details as Record<string, unknown>) : {};
  // `http_status` is the API's status; `status` stays the API's own detail when it gave one (a
  // handoff's or run's status), else the HTTP status, as it always was.
  return new CliError(`${what}: ${apiErrorText(reply)}`, {
    code,
    issues,
    details: { ...details, http_status: reply.status, ...(details['status'] === undefined ? { status: reply.status } : {}) },
  });
}

/** The options every answering command takes (`baton answer`, `baton answer-hold`), beside its own. */
export const ANSWER_OPTIONS = {
  note: { type: 'string' },
  'answer-id': { type: 'string' },
  project: { type: 'string' },
  json: { type: 'boolean' },
} as const;

/** What {@link ANSWER_OPTIONS} gave: the note, the record's project (checked), the answer id (a new one unless given), `--json`. */
export function answerBasics(args: ParsedArgs): { note: string | undefined; project: string | undefined; answerId: string; json: boolean } {
  const given = str(args, 'project');
  return {
    note: str(args, 'note'),
    project: given !== undefined ? projectArg(given) : undefined,
    answerId: str(args, 'answer-id') ?? `cli-${randomUUID()}`,
    json: args.values['json'] === true,
  };
}

/**
 * Send an operator answer (to a stop packet or a held run) and say what became of it: the POST
 * to `/v1[/projects/<p>]/<kind>/<id>/answer` with `answer_id` as its retry key, the usage error
 * of an ambiguous id, `--json` output (with the record's project), a refusal thrown with its code,
 * else the outcome line (applied, or sent and not decided yet). Resolves with the exit code.
 */
export async function postAnswer(
  ctx: CliContext,
  target: { kind: 'stops' | 'runs'; what: string; id: string; project: string | undefined },
  body: { answer_id: string; action: string } & Record<string, unknown>,
  json: boolean,
): Promise<ExitCode> {
  const reply = await callApi(ctx, 'POST', recordPath(target.kind, target.id, target.project, '/answer'), body, {
    option: '--answer-id',
    field: 'answer_id',
    value: body.answer_id,
  });
  throwIfAmbiguous(reply, target.what, target.id);
  const answeredIn = (reply.body as { project?: unknown } | null)?.project;
  const inProject = typeof answeredIn === 'string' ? answeredIn : target.project;
  if (json) printJson(ctx.io, reply.ok && inProject !== undefined ? { project: inProject, ...(reply.body as object) } : reply.body);
  if (!reply.ok) throw apiRefusal(reply, 'the answer was refused');
  if (!json) ctx.io.stdout.write(`${answerOutcomeText(reply, `${target.id}${inProject !== undefined ? ` (project ${inProject})` : ''}: ${body.action}`)}\n`);
  return ExitCode.ok;
}

/**
 * POST an operator's action on a handoff (`/decision`, `/abandon`) through the operator API, with
 * its idempotency key, and say what came of it: the reply as JSON with `--json` (with the handoff's
 * project), a refusal thrown as the API's code, an ambiguous id as a usage error. Resolves with the
 * project the action applied in (when the reply names it), for the command's own line.
 */
export async function postHandoffAction(
  ctx: CliContext,
  input: {
    handoffId: string;
    project: string | undefined;
    action: 'decision' | 'abandon';
    body: Record<string, unknown>;
    key: string;
    json: boolean;
    refused: string;
  },
): Promise<string | undefined> {
  const reply = await callApi(
    ctx,
    'POST',
    recordPath('handoffs', input.handoffId, input.project, `/${input.action}`),
    { ...input.body, idempotency_key: input.key },
    {
      option: '--key',
      field: 'idempotency_key',
      value: input.key,
    },
  );
  throwIfAmbiguous(reply, 'handoff', input.handoffId);
  const actedIn = (reply.body as { handoff?: { project?: unknown } } | null)?.handoff?.project;
  const inProject = typeof actedIn === 'string' ? actedIn : input.project;
  if (input.json) printJson(ctx.io, reply.ok && inProject !== undefined ? { project: inProject, ...(reply.body as object) } : reply.body);
  if (!reply.ok) throw apiRefusal(reply, input.refused);
  return inProject;
}
