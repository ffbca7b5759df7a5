import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { str, type ParsedArgs } from './command';
import type { CliContext } from './context';
import { CliError, CliErrorCode, ExitCode, type CliIssue } from './errors';
import { printJson } from './output';
import { ambiguousId, projectArg } from './timeline';

/**
 * A reply of the operator API: its status, its body (the parsed JSON; the text when it is not
 * JSON; null when empty), and what was asked, so that a reply that is not the API's can say where
 * it came from.
 */
export interface ApiReply {
  status: number;
  ok: boolean;
  body: unknown;
  /** Whether the body was JSON (an empty body is not). */
  json: boolean;
  /** The reply's Content-Type header, or null without one. */
  contentType: string | null;
  /** The request: `GET` / `POST`, its path, and BATON_API_URL it went to (without a trailing slash). */
  method: 'GET' | 'POST';
  path: string;
  base: string;
}

/**
 * The commands that call the operator API, sending BATON_TOKEN to BATON_API_URL (as `baton help`
 * names them under both variables); every other command speaks to NATS or Redis (`pause` and
 * `resume` to the ledger over NATS, with the NATS credentials).
 */
export const API_COMMANDS = ['answer', 'answer-hold', 'decide', 'abandon', 'notice redeliver'] as const;

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

/** What {@link callApi} is told beside the request: the POST's retry key, and what to say when it sends nothing. */
export interface CallOptions {
  retryKey?: RetryKey;
  /**
   * What was not done when BATON_TOKEN is unset and nothing is sent (`the answer was not sent`);
   * default `<METHOD> <path> was not sent`.
   */
  unsent?: string;
}

/**
 * Call the notifier's operator API at BATON_API_URL. Resolves with any HTTP status (the caller
 * maps refusals); throws {@link CliError} when the API cannot be reached, and before anything is
 * sent when BATON_TOKEN is unset ({@link missingToken}: every `/v1` route needs a token).
 */
export async function callApi(ctx: CliContext, method: 'GET' | 'POST', path: string, body?: unknown, options: CallOptions = {}): Promise<ApiReply> {
  const { retryKey } = options;
  const base = ctx.config().BATON_API_URL.replace(/\/+$/, '');
  const token = ctx.config().BATON_TOKEN;
  if (token === undefined) throw missingToken(base, options.unsent ?? `${method} ${path} was not sent`);
  ctx.noteServer('api');
  const url = `${base}${path}`;
  // An answer waits for the router's decision on the server (NOTIFIER_ANSWER_WAIT_MS, at most 60 s).
  const timeoutMs = method === 'POST' ? POST_TIMEOUT_MS : GET_TIMEOUT_MS;
  let response: Response;
  try {
    response = await ctx.fetch(url, {
      method,
      headers: {
        accept: 'application/json',
        authorization: `Bearer ${token}`,
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
  let json = false;
  try {
    parsed = text.length > 0 ? JSON.parse(text) : null;
    json = text.length > 0;
  } catch {
    parsed = text;
  }
  return {
    status: response.status,
    ok: response.ok,
    body: parsed,
    json,
    contentType: response.headers.get('content-type'),
    method,
    path,
    base,
  };
}

/**
 * BATON_TOKEN is unset: the operator API answers every `/v1` route 401 without a token, so the CLI
 * sends nothing and says so — `unauthenticated` (the API's code for the same case), with
 * `details.reason` `missing` as the API would give it. `unsent` says what was not done.
 */
export function missingToken(base: string, unsent: string): CliError {
  return new CliError(
    `${unsent}: BATON_TOKEN is not set: the operator API at ${base} needs a token; set BATON_TOKEN to one an admin made with \`baton token create --role operator --project <p>\``,
    { code: CliErrorCode.unauthenticated, details: { reason: 'missing' } },
  );
}

/**
 * The API's error form, `{ error: { code, message, issues?, details? } }` (the notifier's
 * ErrorBodySchema), or null when the body is not in it: then whatever answered is not Baton's
 * operator API (another service at BATON_API_URL, a proxy's or a login page's reply).
 */
export function apiErrorOf(body: unknown): { code: string; message: string; issues?: unknown; details?: unknown } | null {
  const error = (body as { error?: unknown } | null)?.error;
  if (typeof error !== 'object' || error === null) return null;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code !== 'string' || !/^[a-z][a-z0-9_]*$/.test(code) || typeof message !== 'string') return null;
  return error as { code: string; message: string; issues?: unknown; details?: unknown };
}

/** The start of a body that is not the API's, on one line, for a message (a login page's HTML would be pages long). */
function excerpt(reply: ApiReply): string {
  if (reply.body === null) return 'an empty body';
  const text = (typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body)).replace(/\s+/g, ' ').trim();
  return JSON.stringify(text.length > 120 ? `${text.slice(0, 119)}…` : text);
}

/**
 * The failure of a reply that did not come from Baton's operator API, or not as the route's reply:
 * `unavailable` for a 502, 503 or 504 that is not in the API's error form (a proxy or load
 * balancer in front of the API that could not reach it), else `bad_reply` — a 2xx that is not
 * JSON or not the shape of the route's reply (a login page, a proxy's page, another service), or
 * an error status without the API's error body (`Cannot POST /v1/...`, a plain-text 500). A
 * client never has to read the text: `details.http_status` and `details.content_type` say what came.
 */
export function notTheApi(reply: ApiReply): CliError {
  const what = `${reply.method} ${reply.path}`;
  const came = `HTTP ${reply.status}${reply.contentType !== null ? ` (${reply.contentType})` : ''}`;
  const details = { http_status: reply.status, content_type: reply.contentType, url: `${reply.base}${reply.path}` };
  if (!reply.ok && (reply.status === 502 || reply.status === 503 || reply.status === 504)) {
    return new CliError(
      `the operator API at ${reply.base} is unavailable: ${what} was answered ${came}, ${excerpt(reply)}, not by the API (a proxy in front of it?); try again, and check the notifier`,
      { code: CliErrorCode.unavailable, details },
    );
  }
  const body = reply.ok ? (reply.json ? 'JSON that is not the reply of this route' : 'a body that is not JSON') : "an error body that is not the API's";
  return new CliError(
    `the server at BATON_API_URL (${reply.base}) did not answer ${what} as Baton's operator API: ${came} with ${body}: ${excerpt(reply)} (set BATON_API_URL to the notifier's operator API)`,
    { code: CliErrorCode.badReply, details },
  );
}

/**
 * The body of a 2xx reply when it has the shape of the route's reply (`shape`: the fields the
 * command reads), else {@link notTheApi}'s `bad_reply`: a reply that merely has a 2xx status is
 * not the API saying the request was carried out.
 */
export function replyOf<T>(reply: ApiReply, shape: z.ZodType<T>): T {
  if (!reply.json || !shape.safeParse(reply.body).success) throw notTheApi(reply);
  // The body as the API sent it (--json prints it whole), checked for the fields the command reads.
  return reply.body as T;
}

/*
 * The shapes of the success replies the CLI reads: the fields it relies on (and an answer's
 * `accepted`, the reply's own mark) of the notifier's AnswerAcceptedSchema, DecisionResponseSchema
 * and StopRecordSchema (apps/notifier/src/api/schemas.ts, which the OpenAPI document is built
 * from: an app, which the CLI does not import). Fields it does not read are not checked, so a
 * newer notifier's additions do not make its replies `bad_reply`.
 */

/** `POST .../stops/<id>/answer`, `POST .../runs/<id>/answer`: 200 applied or 202 pending. */
export const AnswerReplyShape = z.object({
  accepted: z.literal(true),
  outcome: z.enum(['applied', 'pending']),
  project: z.string(),
  workflow_run_id: z.string(),
  mesh_run_id: z.string().optional(),
  status_url: z.string(),
  duplicate: z.boolean(),
  event: z.object({ seq: z.number() }).optional(),
  run: z.object({ status: z.string() }).nullable().optional(),
  mesh: z.object({ status: z.string() }).nullable().optional(),
});

/** `POST .../handoffs/<id>/decision` and `.../abandon`: the handoff after it, and the events this request stored (0: a retry). */
export const HandoffActionReplyShape = z.object({
  outcome: z.literal('applied'),
  handoff: z.object({ id: z.string(), project: z.string() }),
  events: z.number().int().min(0),
});
export type HandoffActionReply = z.infer<typeof HandoffActionReplyShape>;

/** `GET .../stops/<id>`: the packet (its status, and the call it freezes with its digest). */
export const StopReplyShape = z.object({
  stop: z.object({ packet_id: z.string(), status: z.string(), pending: z.unknown().optional(), pending_digest: z.string().nullable().optional() }),
});

/**
 * What an answer's reply says happened, for people: `applied <what>; run <id> is now <status>`
 * (200), or `sent <what>; not applied yet … check <status_url>` (202: the router had not decided
 * within the API's wait). Refusals are errors (the caller prints their code and exits 1).
 */
export function answerOutcomeText(reply: Pick<ApiReply, 'status' | 'body'>, what: string): string {
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
 * The API's refusal as the command's failure: the code the API answered with, its message, issues
 * and details unchanged (a `status` among them is the API's: a handoff's or run's status), and the
 * HTTP status as `details.http_status`. A 401 says what to do: the token was sent and
 * refused (unknown, expired or revoked; unset, nothing is sent: {@link missingToken}), so get a new
 * one. An error status whose body is not
 * in the API's error form is not a refusal by Baton: {@link notTheApi} (`unavailable` for 502, 503
 * and 504, else `bad_reply`) — never a code made up from the status.
 */
export function apiRefusal(reply: ApiReply, what: string): CliError {
  const error = apiErrorOf(reply.body);
  if (error === null) return notTheApi(reply);
  const issues = Array.isArray(error.issues)
    ? error.issues.filter((i): i is CliIssue => typeof i === 'object' && i !== null && typeof i.path === 'string' && typeof i.message === 'string')
    : [];
  const details = typeof error.details === 'object' && error.details !== null ? (error.details as Record<string, unknown>) : {};
  const message =
    reply.status === 401 && error.code === 'unauthenticated'
      ? `the operator API at ${reply.base} refused BATON_TOKEN: it is unknown there, expired or revoked (\`baton token list\` shows expiry and revocation); set BATON_TOKEN to a valid token — an admin makes one with \`baton token create\``
      : error.message;
  // The HTTP status is `http_status` alone: `status` is the API's own detail (a handoff's or run's
  // status, a string) when it sent one, and absent when it did not, so its type never depends on
  // the refusal. The API's details are kept as sent; an `http_status` among them is the reply's.
  return new CliError(`${what}: ${error.code}: ${message}`, {
    code: error.code,
    issues,
    details: { ...details, http_status: reply.status },
  });
}

/**
 * Settle a reply that is not a success: with `--json` a refusal in the API's error form is printed
 * on stdout as the API sent it (a refusal's reply stays on stdout; a body that is not the API's
 * is not printed as one), then the refusal is thrown (an ambiguous id as its usage error).
 */
export function throwRefusal(ctx: CliContext, reply: ApiReply, json: boolean, what: string, id: string, refused: string): never {
  throwIfAmbiguous(reply, what, id);
  if (json && apiErrorOf(reply.body) !== null) printJson(ctx.io, reply.body);
  throw apiRefusal(reply, refused);
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
 * a reply that is not the route's `bad_reply`, else the outcome line (applied, or sent and not
 * decided yet). Resolves with the exit code.
 */
export async function postAnswer(
  ctx: CliContext,
  target: { kind: 'stops' | 'runs'; what: string; id: string; project: string | undefined },
  body: { answer_id: string; action: string } & Record<string, unknown>,
  json: boolean,
): Promise<ExitCode> {
  const reply = await callApi(ctx, 'POST', recordPath(target.kind, target.id, target.project, '/answer'), body, {
    retryKey: { option: '--answer-id', field: 'answer_id', value: body.answer_id },
    unsent: 'the answer was not sent',
  });
  if (!reply.ok) throwRefusal(ctx, reply, json, target.what, target.id, 'the answer was refused');
  const answered = replyOf(reply, AnswerReplyShape);
  // The project on top, as it always was printed.
  const { project, ...rest } = answered;
  if (json) printJson(ctx.io, { project, ...rest });
  else ctx.io.stdout.write(`${answerOutcomeText(reply, `${target.id} (project ${project}): ${body.action}`)}\n`);
  return ExitCode.ok;
}

/**
 * POST an operator's action on a handoff (`/decision`, `/abandon`) through the operator API, with
 * its idempotency key, and say what came of it: the reply as JSON with `--json` (with the handoff's
 * project), a refusal thrown as the API's code, an ambiguous id as a usage error, a reply that is
 * not the route's `bad_reply`. Resolves with the reply (the handoff after it, and `events`: 0 when
 * this key had been applied before), for the command's own line.
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
    /** The failure's opening when the API refused it (`the decision was refused`)… */
    refused: string;
    /** …and when nothing was sent (BATON_TOKEN unset: `the decision was not sent`). */
    unsent: string;
  },
): Promise<HandoffActionReply> {
  const reply = await callApi(
    ctx,
    'POST',
    recordPath('handoffs', input.handoffId, input.project, `/${input.action}`),
    { ...input.body, idempotency_key: input.key },
    { retryKey: { option: '--key', field: 'idempotency_key', value: input.key }, unsent: input.unsent },
  );
  if (!reply.ok) throwRefusal(ctx, reply, input.json, 'handoff', input.handoffId, input.refused);
  const acted = replyOf(reply, HandoffActionReplyShape);
  // The reply with the handoff's project on top, as `answer --json` prints it.
  if (input.json) printJson(ctx.io, { project: acted.handoff.project, ...(reply.body as object) });
  return acted;
}
