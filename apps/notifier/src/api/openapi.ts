import { z } from 'zod';
import { allowingUnlistedProperties, contractJsonSchema, OperatorApiRequestSchemas, ProjectSummarySchema, type OperatorApiRequestName } from '@baton/contracts';
import {
  AnswerAcceptedSchema,
  AnswerStatusSchema,
  DecisionResponseSchema,
  NoticeRedeliveryReplySchema,
  ProjectWebhooksSchema,
  WebhookNamesSchema,
  ErrorBodySchema,
  HandoffViewSchema,
  ProjectControlResponseSchema,
  InboxPageSchema,
  EventStreamQuerySchema,
  InboxQuerySchema,
  MeshResponseSchema,
  ProjectionsResponseSchema,
  HealthLiveSchema,
  HealthReadySchema,
  RunResponseSchema,
  StopRecordSchema,
  StopsPageSchema,
  StopsQuerySchema,
} from './schemas';
import { WEBHOOK_FAILURE_REASONS, type WebhookFailureReason } from '../notices/webhook-sender';

type JsonSchema = Record<string, unknown>;

const schemaOf = (schema: z.ZodType, io: 'input' | 'output'): JsonSchema => {
  const json = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as JsonSchema;
  delete json['$schema'];
  return json;
};

/** A response: what the API writes may gain optional fields in a newer Baton, so its schema allows properties it does not list (requests stay strict). */
const json = (schema: z.ZodType, description: string) => ({
  description,
  content: { 'application/json': { schema: allowingUnlistedProperties(schemaOf(schema, 'output')) } },
});
const error = (description: string) => json(ErrorBodySchema, description);
/** The 502 of a notice redelivery: which webhooks took the notice and which did not, and why. */
const WebhookRedeliveryRefusalSchema = ErrorBodySchema.extend({
  error: ErrorBodySchema.shape.error.extend({
    code: z.enum(['webhook_delivery_failed', 'webhook_partially_delivered']),
    details: z.object({
      delivered: z.array(z.string()).describe('webhooks (by id) that answered 2xx to this request'),
      failed: z.array(
        z.object({
          target: z.string().describe('the webhook (by id: the first 16 hex digits of the SHA-256 of its URL)'),
          name: z.string().describe('the webhook’s name: its configured `name`, or one derived from its URL'),
          reason: z.enum(WEBHOOK_FAILURE_REASONS.map((r) => r.code) as [WebhookFailureReason, ...WebhookFailureReason[]]),
          error: z.string().describe('what happened, for a person: `HTTP 503`, `connect ECONNREFUSED 10.0.0.7:443`, `read ECONNRESET`…'),
          status: z.number().int().optional().describe('`http_status`: the status the webhook answered'),
        }),
      ),
      skipped: z.array(z.string()).describe('webhooks that had taken it before: not called'),
      busy: z.array(z.string()).describe('webhooks another sender is delivering it to this moment: not called twice'),
      webhook_names: WebhookNamesSchema,
    }),
  }),
});

/** The 503 of a route that relays a ledger command: it may have been applied; retry with the same key. */
const NO_LEDGER_ANSWERED =
  'no ledger answered in time (`timeout`, `no_responders`): the command may have been applied. `details.idempotency_key` is the key it was sent with (generated when the request had none) and `Retry-After` says when to send it again with that key';

/** One OpenAPI query parameter per member of a (strict object) query schema. */
function queryParameters(schema: z.ZodObject): object[] {
  return Object.entries(schema.shape).map(([name, member]) => {
    const input = schemaOf(member as z.ZodType, 'input');
    return { name, in: 'query', required: false, schema: input, ...(input['description'] ? { description: input['description'] } : {}) };
  });
}

const idParam = (description: string) => ({
  name: 'id',
  in: 'path',
  required: true,
  description,
  schema: { type: 'string', pattern: '^[A-Za-z0-9_\\-:@]+$', maxLength: 128 },
});
const projectParam = {
  name: 'project',
  in: 'path',
  required: true,
  description: 'the project key (ids are unique only within a project); a project the token may not see answers 404',
  schema: { type: 'string', pattern: '^[a-z0-9][a-z0-9_-]*$', maxLength: 64 },
};
/**
 * A request body: JSON, or the same fields form-encoded (a form's numbers, such as `cap`, are read
 * from their decimal text). Its schema is the published `docs/schemas/<name>.json` (without `$schema`
 * and `$id`), generated from the zod schema the route parses the body with
 * ({@link OperatorApiRequestSchemas}): the document and the file cannot say different things.
 */
const body = (name: OperatorApiRequestName) => {
  const { $schema: _dialect, $id: _id, ...input } = contractJsonSchema(name, OperatorApiRequestSchemas[name].schema);
  return {
    required: true,
    description: `docs/schemas/${name}.json`,
    content: { 'application/json': { schema: input }, 'application/x-www-form-urlencoded': { schema: input } },
  };
};

/** Every `/v1` answer is for who asked: no shared cache stores it, a browser revalidates it. */
const privateHeaders = {
  ETag: { description: "the answer's entity tag, for `If-None-Match`", schema: { type: 'string' } },
  'Cache-Control': { description: '`private, no-cache`', schema: { type: 'string' } },
  Vary: { description: '`Authorization, Cookie`', schema: { type: 'string' } },
};

/** The authentication's 503: the token revocation log cannot be read (an outage, not bad credentials). */
const REVOCATIONS_UNAVAILABLE =
  "`revocations_unavailable`: the deployment's token revocation log (JetStream) cannot be read just now, so the token (or session) cannot be checked — keep it and retry after `Retry-After` (said only to a caller whose token verifies; anyone else hears 401)";

const retryAfter = { 'Retry-After': { description: 'seconds to wait before trying again', schema: { type: 'integer', minimum: 1 } } };

/**
 * What every `/v1` operation may answer besides its own responses (unless it names them itself):
 * 401 without a valid token, 429 after too many failed authentications from the client's address,
 * 503 when Redis does not answer; a POST also 413 for a body over the limit and 415 for a body it
 * does not read; a GET (but the live stream) 304 to a conditional request whose answer is unchanged.
 * A GET outside `/v1` (the document itself, `/docs`, health) may answer 304 too.
 */
function withCommonResponses(paths: Record<string, Record<string, { responses: Record<string, unknown> }>>, unreadable: object): void {
  for (const [path, operations] of Object.entries(paths)) {
    if (!path.startsWith('/v1/')) {
      // Outside the API every GET answer carries an ETag too (the document, the docs page, health).
      const get = operations['get'];
      if (get !== undefined && get.responses['304'] === undefined) {
        get.responses['304'] = { description: 'Not Modified: the answer is the one whose `ETag` the request gave in `If-None-Match` (no body)' };
      }
      continue;
    }
    for (const [method, operation] of Object.entries(operations)) {
      const common: Record<string, unknown> = {
        '401': {
          ...error(
            '`unauthenticated`: no valid token; `error.details.reason` says why: `missing`, `malformed`, `unknown`, `unsigned`, `expired`, `revoked` or `session_ended`',
          ),
          headers: { 'WWW-Authenticate': { description: '`Bearer`', schema: { type: 'string' } } },
        },
        '429': { ...error('`too_many_auth_failures`: this client address failed to authenticate too often this minute'), headers: retryAfter },
        '503': {
          ...error(
            `\`projections_unavailable\`: Redis did not answer in time; ${REVOCATIONS_UNAVAILABLE}${method === 'post' ? '; `redis_full`: Redis refused the write for being full (maxmemory), reads still answer' : ''}`,
          ),
          headers: retryAfter,
        },
        ...(method === 'post'
          ? { '413': error('`payload_too_large`: the body (or a form with more than 1,000 fields) is over the limit'), '415': unreadable }
          : {}),
        // A JSON answer carries an ETag; asked again with it in If-None-Match, an unchanged answer is 304.
        ...(method === 'get' && path !== '/v1/events/stream'
          ? {
              '304': {
                description: 'Not Modified: the answer is the one whose `ETag` the request gave in `If-None-Match` (no body)',
                headers: privateHeaders,
              },
            }
          : {}),
      };
      for (const [status, response] of Object.entries(common)) {
        const own = operation.responses[status] as Record<string, unknown> | undefined;
        if (own === undefined) operation.responses[status] = response;
        // A route's own 503 (a ledger or an answer not confirmed) may be the authentication's too.
        else if (status === '503' && typeof own['description'] === 'string' && !own['description'].includes('revocations_unavailable'))
          operation.responses[status] = { ...own, description: `${own['description']}; ${REVOCATIONS_UNAVAILABLE}`, headers: own['headers'] ?? retryAfter };
        else if (own['headers'] === undefined && (response as Record<string, unknown>)['headers'] !== undefined)
          operation.responses[status] = { ...own, headers: (response as Record<string, unknown>)['headers'] };
      }
      // A GET's 200 carries the same headers its 304 does (what a generated client reads to revalidate).
      const ok = operation.responses['200'] as Record<string, unknown> | undefined;
      if (method === 'get' && path !== '/v1/events/stream' && ok !== undefined && ok['headers'] === undefined) {
        operation.responses['200'] = { ...ok, headers: privateHeaders };
      }
      const accepted = operation.responses['202'] as Record<string, unknown> | undefined;
      if (accepted !== undefined) {
        operation.responses['202'] = { ...accepted, headers: { Location: { description: 'the `status_url`', schema: { type: 'string' } } } };
      }
    }
  }
}

/**
 * The OpenAPI 3.1 document of the operator API, hand-built from the same zod schemas the
 * controllers parse with (requests as `input`, responses as `output`), so it cannot drift from
 * what the service accepts. Every error answers `{ error: { code, message, issues } }`.
 */
export function buildOpenApiDocument(): object {
  const bad = error('invalid input: `schema_violation` (query, path or body), `malformed_json`, `invalid_utf8`, `malformed_body`');
  const forbiddenProject = error('`project_forbidden`: the `project` filter names a project the token may not see (`error.details.projects`)');
  const missing = error('`not_found`');
  const unreadable = error(
    'a body the API does not read: `unsupported_media_type` (not `application/json` or a form, or no `Content-Type`; `error.details.accepted` lists the types), `unsupported_charset`, `unsupported_encoding` (a `Content-Encoding` other than `gzip`, `deflate`, `br` or `identity`)',
  );
  const ambiguous = error(
    '`ambiguous_id`: the id exists in several projects the token may see (`error.details.projects` lists them); use the project route `/v1/projects/{project}/...`',
  );
  /** An id-only route: a convenience answering only when the id is unambiguous among the token's projects. */
  const idOnly = (
    operation: { operationId: string; summary: string; description?: string; responses: Record<string, unknown> } & Record<string, unknown>,
    projectRoute: string,
  ) => ({
    ...operation,
    description: `${operation.description ? `${operation.description} ` : ''}Addresses the record by id alone: answered only when exactly one project the token may see holds the id (404 when none does, 409 \`ambiguous_id\` listing the projects when several do). Prefer \`${projectRoute}\`.`,
    responses: {
      ...operation.responses,
      '409': operation.responses['409']
        ? error(`${String((operation.responses['409'] as { description: string }).description)}; \`ambiguous_id\` (several projects hold the id)`)
        : ambiguous,
    },
  });
  /** The same operation on the project route: project and id name the record. */
  const scoped = (operation: { operationId: string; parameters: object[] } & Record<string, unknown>) => ({
    ...operation,
    operationId: `${operation.operationId}InProject`,
    parameters: [projectParam, ...operation.parameters],
  });
  const getStop = {
    operationId: 'getStop',
    summary: 'One stop packet with its answer and the effect of the answer',
    parameters: [idParam('the packet id')],
    responses: { '200': json(StopRecordSchema, 'the packet'), '400': bad, '404': missing },
  };
  const answerUnavailable = error(
    '`projections_unavailable`: Redis did not answer in time (retry after `Retry-After`); `answer_outcome_unknown`: the answer was sent but not confirmed in time (`Retry-After`) — send the same `answer_id` (`error.details.answer_id`) again, or read `error.details.status_url`',
  );
  const answerStop = {
    operationId: 'answerStop',
    summary: "Answer a stop packet's form (one of its buttons)",
    description:
      "Published to the router on `<prefix>.in.<project>.answer` (a mesh's packet on `…mesh_answer`; Nats-Msg-Id = `answer:<project>:<workflow_run_id>/<answer_id>`), then the API waits (at most `NOTIFIER_ANSWER_WAIT_MS`, default 5 s) for the router's decision in the run's (mesh's) event stream and answers with the outcome: 200 `applied` with the new state; 409 with the code the router recorded when it refused the answer (e.g. `run_not_stopped` when another operator's answer was applied first); 202 `pending` with `status_url` (and `Location`) when it was not decided in time. Send the same `answer_id` to retry safely.",
    parameters: [idParam('the packet id')],
    requestBody: body('operator-answer-request'),
    responses: {
      '200': json(AnswerAcceptedSchema, '`applied`: the router applied the answer; `run` (or `mesh`) is the state after it'),
      '202': json(AnswerAcceptedSchema, '`pending`: published, not decided within the wait; GET `status_url` for the outcome'),
      '400': error(
        '`schema_violation` (among them an `action` other than approve, deny, intent, raise_cap, acknowledge: `accept` / `rework` decide a completion handback, `POST …/handoffs/{id}/decision`), `answer_not_allowed` (not a button of the packet’s form; `error.details.allowed`), `answer_incomplete`, `intent_not_offered`, `cap_not_raised`',
      ),
      '403': error(
        "`role_forbidden` (a viewer token only reads: `error.details.role`, `error.details.required_role` = `operator`); `identity_mismatch` (the body's `answered_by` names another than the token: `error.details.field`, `error.details.actor` = the token's name; nothing was sent)",
      ),
      '415': unreadable,
      '404': missing,
      '409': error(
        "`stop_already_answered` (the packet is not open: fail closed), `stale_answer`; `answer_id_reused` (the `answer_id` was used for another answer of the same run or mesh, however long ago, or is the packet's recorded answer id sent with another action or fields; `error.details.used_for` names its run or mesh); or the router refused the answer: the code it recorded (`run_not_stopped`, `stop_already_answered`, `stale_answer`…), `error.details.outcome` = `refused`, `error.details.event` the refusal event",
      ),
      '503': answerUnavailable,
    },
  };
  const getRun = {
    operationId: 'getRun',
    summary: 'A workflow run: status, workflow, current step and agent, callback, hops, open stop; its timeline and handoffs',
    parameters: [idParam('the workflow run id')],
    responses: { '200': json(RunResponseSchema, 'the run'), '400': bad, '404': missing },
  };
  const answerHold = {
    operationId: 'answerHold',
    summary: 'Answer a held run: continue, reroute (with a target) or terminate',
    parameters: [idParam('the workflow run id')],
    description:
      "Published to the router, then answered with the outcome exactly as a stop packet's answer: 200 `applied`, 409 refused with the router's code, 202 `pending` with `status_url`.",
    requestBody: body('hold-answer-request'),
    responses: {
      '200': json(AnswerAcceptedSchema, '`applied`: the run after the answer in `run`'),
      '202': json(AnswerAcceptedSchema, '`pending`: GET `status_url` for the outcome'),
      '400': bad,
      '403': error(
        "`role_forbidden` (a viewer token only reads: `error.details.role`, `error.details.required_role` = `operator`); `identity_mismatch` (the body's `answered_by` names another than the token: `error.details.field`, `error.details.actor` = the token's name; nothing was sent)",
      ),
      '415': unreadable,
      '404': missing,
      '409': error(
        '`run_not_held` (a new answer to a run that is not held; the same `answer_id` sent again after the router decided it answers that outcome again, `duplicate: true`); `answer_id_reused` (as for a stop answer); or the router refused the answer (its code, `error.details.outcome` = `refused`)',
      ),
      '503': answerUnavailable,
    },
  };
  const getMesh = {
    operationId: 'getMesh',
    summary: 'A handoff mesh run: its turns, the handoffs taken, the calls ignored and why, the cap, the outcome; its timeline',
    description:
      "Read from the mesh aggregate's events in the events stream (no projection holds meshes), so it is as current as the stream. The inbox's mesh stop items link to its page.",
    parameters: [idParam('the mesh run id')],
    responses: { '200': json(MeshResponseSchema, 'the mesh run'), '400': bad, '404': missing },
  };
  const answerStatus = (kind: 'run' | 'mesh') => ({
    operationId: kind === 'run' ? 'getRunAnswer' : 'getMeshAnswer',
    summary: `What became of an operator answer to a ${kind === 'run' ? 'workflow run (stop packet or hold)' : "handoff mesh's stop packet"}: applied, refused (with the router's code) or pending`,
    description:
      "Read from the aggregate's own events: `applied` when the router appended `run.resumed` / `mesh.stop_answered` for the answer id, `refused` when it recorded `run.result_rejected` / `mesh.turn_rejected` for it, else `pending` (sent through the API, not decided yet). 404 `answer_not_found` when no answer with that id was sent through the API and none was decided (an answer the API refused was never sent: its refusal was the reply; after a 503 `answer_outcome_unknown`, send the same `answer_id` again). The `status_url` of a 202 answer.",
    parameters: [
      projectParam,
      idParam(kind === 'run' ? 'the workflow run id' : 'the mesh run id'),
      { name: 'answer_id', in: 'path', required: true, description: 'the answer id', schema: { type: 'string', maxLength: 128 } },
    ],
    responses: {
      '200': json(AnswerStatusSchema, 'the outcome'),
      '400': bad,
      '404': error('`not_found` (no such run or mesh in a project the token may see); `answer_not_found` (no answer with that id was sent or decided)'),
    },
  });
  const getHandoff = {
    operationId: 'getHandoff',
    summary: 'A handoff record and its event timeline',
    parameters: [idParam('the handoff id')],
    responses: { '200': json(HandoffViewSchema, 'the handoff'), '400': bad, '404': missing },
  };
  const decideHandback = {
    operationId: 'decideHandback',
    summary: 'Accept or rework a completion handback (a rework carries a note)',
    description:
      "The ledger decides at once (request/reply): 200 `applied` with the decided handback, or its refusal with the ledger's code and `error.details.outcome` = `refused` (409 when another decision came first). `idempotency_key` makes a retry safe: the same decision sent again is 200 again; the same key with the other decision or another note is 409 `idempotency_key_reused` (`error.details.decided` names the decision recorded under it).",
    parameters: [idParam('the completion handback id')],
    requestBody: body('handback-decision-request'),
    responses: {
      '200': json(DecisionResponseSchema, 'the decided handback'),
      '400': bad,
      '415': unreadable,
      '403': error(
        "`role_forbidden` (a viewer token only reads: `error.details.role`, `error.details.required_role` = `operator`); `identity_mismatch` (the body's `actor` names another than the token: `error.details.field`, `error.details.actor` = the token's name; nothing was sent); or the ledger refused the actor: `self_accept_forbidden` (the worker deciding its own work), `principal_not_allowed`…",
      ),
      '404': missing,
      '409': error('the ledger refused the state (e.g. already decided)'),
      '503': { ...error(NO_LEDGER_ANSWERED), headers: retryAfter },
    },
  };
  const abandonHandoff = {
    operationId: 'abandonHandoff',
    summary: 'Withdraw (abandon) an open handoff: pending, claimed or returned (a reason is required)',
    description:
      "Relayed to the ledger as the token's operator (`<prefix>.cmd.ledger.<project>.op.notifier.abandon`), which decides at once: 200 `applied` with the abandoned handoff (its `handoff.abandoned` event names the token as `abandoned_by`), or its refusal with the ledger's code and `error.details.outcome` = `refused`. A workflow run the handoff belongs to sees it ended without a result (`handoff_abandoned`): a pending returnable child's route applies its ON_FAILURE, the handoff the run's current agent works on holds the run for a person. `idempotency_key` makes a retry safe: the same key and reason again is 200 with `events` 0; the same key with another reason is 409 `idempotency_key_reused` (`error.details.abandoned_reason` names the reason recorded under it).",
    parameters: [idParam('the handoff id')],
    requestBody: body('abandon-handoff-request'),
    responses: {
      '200': json(DecisionResponseSchema, 'the abandoned handoff; `events` 0 for a retry'),
      '400': bad,
      '415': unreadable,
      '403': error(
        "`role_forbidden` (a viewer token only reads: `error.details.role`, `error.details.required_role` = `operator`); `identity_mismatch` (the body's `actor` names another than the token: `error.details.field`, `error.details.actor` = the token's name; nothing was sent); or the ledger refused the actor: `review_end_forbidden` (the token names the worker whose work the handback reviews), `principal_not_allowed`…",
      ),
      '404': missing,
      '409': error(
        '`handoff_not_open` (the handoff already ended: completed, released, abandoned, failed or archived); `idempotency_key_reused` (the key abandoned it with another reason)',
      ),
      '503': { ...error(NO_LEDGER_ANSWERED), headers: retryAfter },
    },
  };
  const controlProject = (name: 'pause' | 'resume') => ({
    operationId: name === 'pause' ? 'pauseProject' : 'resumeProject',
    summary:
      name === 'pause'
        ? 'The kill switch: pause the project — no handoff of it is offered or claimed until it is resumed (admin)'
        : 'Resume a paused project: claims are taken again and every pending handoff is offered again (admin)',
    description:
      "Relayed to the ledger as the token's admin (`<prefix>.cmd.ledger.<project>.op.notifier." +
      name +
      "`), which decides at once: 200 with the project's kill switch after it and `events` (0 when the same `idempotency_key` and body were applied before: a retry changes nothing). Runs still start, route and record while a project is paused; nothing is lost." +
      (name === 'pause' ? ' A project with no published definition is refused `project_unknown` unless `force` is true.' : ''),
    parameters: [projectParam],
    requestBody: body(name === 'pause' ? 'project-pause-request' : 'project-resume-request'),
    responses: {
      '200': json(ProjectControlResponseSchema, "the project's kill switch after the request"),
      '400': bad,
      '403': error(
        '`role_forbidden` (the kill switch needs an admin token: a viewer or operator token is refused, `error.details.role` its role, `error.details.required_role` = `admin`)',
      ),
      '404': error(
        name === 'pause'
          ? '`not_found` (a project the token may not see); `project_unknown` (no published definition and no `force`; `error.details.project`)'
          : '`not_found` (a project the token may not see)',
      ),
      '409': error(
        name === 'pause'
          ? '`project_already_paused`; `idempotency_key_reused` (the key was used with another body)'
          : '`project_not_paused`; `idempotency_key_reused` (the key was used with another body)',
      ),
      '415': unreadable,
      '503': { ...error(NO_LEDGER_ANSWERED), headers: retryAfter },
    },
  });
  const document = {
    openapi: '3.1.0',
    info: {
      title: 'Baton operator API',
      version: '1.0.0',
      description:
        "The notifier service: the operator inbox, stop packets, handoff and run views (Redis projections of the event streams), mesh run views (read from the events stream), and the operator actions (answer a stop packet or a hold, accept or rework a completion handback, withdraw an open handoff). Every `/v1` route needs `Authorization: Bearer <token>` (made with `baton token create`; roles viewer / operator / admin, scoped to projects): a caller sees and answers only its projects (another project's item answers 404), a viewer cannot answer (403 `role_forbidden`, `error.details.required_role` naming the least role that may: `operator`, or `admin` for the kill switch), and `answered_by` / `actor_role` / the decision's and the abandon's actor come from the token, never from the body: a body's `answered_by` or `actor` may only repeat the token's name (another is 403 `identity_mismatch`, nothing sent). Each POST body's schema is published as `docs/schemas/<name>-request.json` (the requestBody's `description` names the file). 401 `unauthenticated` without a valid token (tokens may expire; `error.details.reason`: `missing`, `malformed`, `unknown`, `unsigned` (the token's record is not signed with the deployment's token key), `expired`, `revoked` or `session_ended`), before any refusal of the request's body; 503 `revocations_unavailable` with `Retry-After` while the deployment's token revocation log cannot be read (an outage: keep the token and retry); 429 `too_many_auth_failures` with `Retry-After` to a client address after `NOTIFIER_AUTH_FAILURES_PER_MINUTE` failed tokens or sign-ins (whatever it sends until the minute ends; behind a proxy set `NOTIFIER_TRUST_PROXY` so that the address is the client's); a request the HTTP server cannot take is answered in the same error form and the connection closed: 431 `headers_too_large` (headers over 16 KiB), 408 `request_timeout`, 400 `malformed_request`; 503 `projections_unavailable` with `Retry-After` within about `REDIS_COMMAND_TIMEOUT_MS` when Redis does not answer. Responses send `X-Content-Type-Options: nosniff`. Ids are unique only within a project: runs, handoffs and stop packets are addressed by project and id (`/v1/projects/{project}/runs/{id}`...); the id-only routes remain as a convenience and answer 409 `ambiguous_id` (with `error.details.projects`) when several of the token's projects hold the id. A path no route serves is 404 `route_not_found`, a route asked with a method it does not take 405 `method_not_allowed` with `Allow`.",
    },
    components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'an operator token from `baton token create`' } } },
    security: [{ bearer: [] }],
    paths: {
      '/v1/inbox': {
        get: {
          operationId: 'listInbox',
          summary: 'Items a person must act on (stops, holds, handbacks, escalations)',
          description:
            'Newest (`order=newest`) or most urgent first; filters take one value or a comma-separated list; `status` defaults to `open` (`any` for all); page with `next_cursor` (null on the last page; a page whose filters match few of the items it walks may hold fewer than `limit` items and still have one — read on). `open_count`: how many open items the filters other than `status` select — the size of the inbox, not of the page (counted in Redis over the smaller of the index sets of the filters, usually the open items).',
          parameters: queryParameters(InboxQuerySchema),
          responses: { '200': json(InboxPageSchema, 'one page of inbox items'), '400': bad, '403': forbiddenProject },
        },
      },
      '/v1/stops': {
        get: {
          operationId: 'listStops',
          summary: 'Stop packets by why, run, agent, status, project and time, newest first',
          parameters: queryParameters(StopsQuerySchema),
          responses: { '200': json(StopsPageSchema, 'one page of stop packets'), '400': bad, '403': forbiddenProject },
        },
      },
      '/v1/projects/{project}': {
        get: {
          operationId: 'getProject',
          summary: "A project's published definition in short and its kill switch (active, or paused: by whom, since when, why)",
          description:
            "Read from the project's definition and control aggregates in the events stream. 404 `not_found` for a project the token may not see, and for one Baton holds nothing of (no definition published, never paused).",
          parameters: [projectParam],
          responses: { '200': json(ProjectSummarySchema, 'the project'), '400': bad, '404': missing },
        },
      },
      '/v1/projects/{project}/notices/{notice_id}/redeliver': {
        post: {
          operationId: 'redeliverNotice',
          summary: "Send a human action notice to the project's webhooks again (one whose delivery was given up on), skipping those that took it",
          description:
            'A notice the notifier gave up delivering (`NOTIFIER_WEBHOOK_MAX_ATTEMPTS` failures: dead-lettered on `<prefix>.dlq.notifier-webhooks` / `notifier-mesh-webhooks`) is not redriven — its event stays in the events stream and is never published again — so an operator sends it once the receiver is fixed. Read from the `notices` projection and delivered as the consumer delivers it: signed, `Baton-Delivery-Attempt` one past `NOTIFIER_WEBHOOK_MAX_ATTEMPTS`. A webhook that already answered 2xx for it is skipped, so a repeated request calls nobody twice. Operator and admin tokens.',
          parameters: [
            projectParam,
            {
              name: 'notice_id',
              in: 'path',
              required: true,
              schema: { type: 'string', minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9_:@-]+$' },
              description: 'the notice id (`nt-…`; the dead letter holds its event)',
            },
          ],
          requestBody: { ...body('notice-redeliver-request'), required: false },
          responses: {
            '200': json(NoticeRedeliveryReplySchema, 'delivered now, or already delivered to every webhook serving the project'),
            '400': bad,
            '403': error('`role_forbidden` (a viewer token only reads: `error.details.role`, `error.details.required_role` = `operator`)'),
            '404': missing,
            '409': error(
              '`no_webhooks`: no webhook of `NOTIFIER_WEBHOOKS` serves the project; `delivery_in_progress`: another sender (the consumer, another request) is delivering it to a webhook this moment (`error.details.busy`, by id; `error.details.webhook_names` names them)',
            ),
            '502': json(
              WebhookRedeliveryRefusalSchema,
              '`webhook_delivery_failed`: no webhook took it now and one still failed; `webhook_partially_delivered`: some took it now (`error.details.delivered`) and one still failed — a partial success. `error.details.failed` names each webhook that failed (`target`, its id, and `name`), why (`reason`: a stable code, see docs/errors.md), what happened (`error`: `HTTP 503`, `connect ECONNREFUSED …`) and, for an HTTP answer, its `status`; `skipped` those that had it, `busy` those another sender is delivering it to',
            ),
          },
        },
      },
      '/v1/projects/{project}/webhooks': {
        get: {
          operationId: 'listProjectWebhooks',
          summary:
            'The webhooks serving the project and what their deliveries of its notices did: last success, last failure with its reason, failing since, dead-lettered',
          description:
            "Each webhook of `NOTIFIER_WEBHOOKS` whose `projects` include the project (or that serves every project), in configuration order, by `id` (a hash of its URL, never the URL) and `name` (its configured `name`, or one derived from its URL). Its status is the project's own — a webhook serving several projects shows each project only its deliveries — as every notifier instance records it in Redis: each call that took a notice (`last_success`) or failed (`last_failure`, its `reason` a stable code), the first failure since the last success (`failing_since`; `state` `failing`), and the notices it never took (`dead_lettered`: `baton dlq list --source notifier-webhooks` lists their letters; the redeliver route sends them again). `state` `unknown`: no call recorded yet (or Redis lost the record). An empty list when no webhook serves the project. Viewer, operator and admin tokens of the project.",
          parameters: [projectParam],
          responses: { '200': json(ProjectWebhooksSchema, 'the webhooks serving the project'), '400': bad, '404': missing },
        },
      },
      '/v1/projects/{project}/pause': { post: controlProject('pause') },
      '/v1/projects/{project}/resume': { post: controlProject('resume') },
      '/v1/projects/{project}/stops/{id}': { get: scoped(getStop) },
      '/v1/projects/{project}/stops/{id}/answer': { post: scoped(answerStop) },
      '/v1/projects/{project}/runs/{id}': { get: scoped(getRun) },
      '/v1/projects/{project}/runs/{id}/answer': { post: scoped(answerHold) },
      '/v1/projects/{project}/runs/{id}/answers/{answer_id}': { get: answerStatus('run') },
      '/v1/projects/{project}/meshes/{id}': { get: scoped(getMesh) },
      '/v1/projects/{project}/meshes/{id}/answers/{answer_id}': { get: answerStatus('mesh') },
      '/v1/projects/{project}/handoffs/{id}': { get: scoped(getHandoff) },
      '/v1/projects/{project}/handoffs/{id}/decision': { post: scoped(decideHandback) },
      '/v1/projects/{project}/handoffs/{id}/abandon': { post: scoped(abandonHandoff) },
      '/v1/stops/{id}': { get: idOnly(getStop, '/v1/projects/{project}/stops/{id}') },
      '/v1/stops/{id}/answer': { post: idOnly(answerStop, '/v1/projects/{project}/stops/{id}/answer') },
      '/v1/runs/{id}': { get: idOnly(getRun, '/v1/projects/{project}/runs/{id}') },
      '/v1/runs/{id}/answer': { post: idOnly(answerHold, '/v1/projects/{project}/runs/{id}/answer') },
      '/v1/handoffs/{id}': { get: idOnly(getHandoff, '/v1/projects/{project}/handoffs/{id}') },
      '/v1/meshes/{id}': { get: idOnly(getMesh, '/v1/projects/{project}/meshes/{id}') },
      '/v1/handoffs/{id}/decision': { post: idOnly(decideHandback, '/v1/projects/{project}/handoffs/{id}/decision') },
      '/v1/handoffs/{id}/abandon': { post: idOnly(abandonHandoff, '/v1/projects/{project}/handoffs/{id}/abandon') },
      '/v1/events/stream': {
        get: {
          operationId: 'eventStream',
          summary:
            "Server-sent events: `event: inbox` with { seq, project, event_type, aggregate } after each inbox change of the caller's projects (or of the `project` filter's)",
          parameters: queryParameters(EventStreamQuerySchema),
          description:
            'The first frame is `event: ready`. The web inbox listens here (with its session cookie; GET requests accept it) and reloads the items that changed. At most `NOTIFIER_STREAMS_PER_TOKEN` streams per token and `NOTIFIER_STREAMS_MAX` in all; a stream whose token is revoked or expires (or whose session signs out) receives `event: closed` with `{reason}` and ends.',
          responses: {
            '200': { description: 'text/event-stream', content: { 'text/event-stream': { schema: { type: 'string' } } } },
            '400': bad,
            '401': error('`unauthenticated`'),
            '403': forbiddenProject,
            '429': error('`too_many_streams` (`error.details.scope`: `token` or `total`; `Retry-After`), or `too_many_auth_failures`'),
          },
        },
      },
      '/v1/projections': {
        get: {
          operationId: 'listProjections',
          summary: 'Each projection: the generation operators read, how far it is behind the stream, and the rebuilds running on it with their progress',
          description:
            'A rebuild (by a notifier, or `baton replay`) writes a shadow generation and swaps it in atomically; until then every read serves the previous generation, whole. Per projection: `active_generation`, `last_seq`, `behind_by` (stream events not applied yet), `behind_reason` (`redis_full` while Redis refuses the projections’ writes: maxmemory reached, its events wait until Redis has room and are applied then, none lost; null otherwise), `needs_rebuild`, `rebuilding`, and `rebuilds` (`kind` rebuild or scratch (a comparison), `by`, `phase`, `seq` / `target_seq`, `events` / `total_events`, `percent`, `rate` (events/s), `eta_seconds`, `stale`: its process died, the next rebuild deletes its shadow). Any authenticated caller; the events stream’s counters only to a caller that sees every project (an admin, a `*` token): `redis` (`full`, `since`, `refused`: whether Redis refuses the projections’ writes for being full, as `/health/ready`’s `details.redis`); for a token scoped to some projects the report is `{ counters: "hidden", rebuilding, redis, projections }`, each projection without `last_seq` and `behind_by` (`behind`: true / false / null instead) and each rebuild without `seq`, `target_seq`, `events`, `total_events` and `rate` — they count every tenant’s events. `/health/ready` (no token) carries the scoped figures in `details.projections`: per projection `behind` and one running rebuild — this notifier’s own, else the oldest another instance runs (lowest generation) — with its `generation`, `by` (the instance that runs it: a notifier’s `BATON_INSTANCE`, by default `notifier-<host>-<pid>`), `this_instance`, `percent`, `eta_seconds`: one rebuild’s figures, which only grow. `standing_back` (both reports and readiness) is null unless a newer release of the notifier built some projection: then this notifier applies, rebuilds and publishes nothing and is not ready (`checks.projection_versions: false`) — `reason` `newer_release`, `since`, and per projection its `version` here and the `stored_version`.',
          responses: {
            '200': json(
              ProjectionsResponseSchema,
              '`{ stream: { name, last_seq, messages } | null, rebuilding, redis, projections: [...] }`; for a token scoped to some projects `{ counters: "hidden", rebuilding, redis, projections: [...] }`',
            ),
            '400': error('`schema_violation`: the route takes no query parameters'),
            '401': error('`unauthenticated`'),
          },
        },
      },
      '/health/live': {
        get: {
          operationId: 'healthLive',
          summary: 'Liveness: the process answers (no dependency is checked)',
          security: [],
          responses: { '200': json(HealthLiveSchema, '`{ "status": "ok" }`') },
        },
      },
      '/health/ready': {
        get: {
          operationId: 'healthReady',
          summary:
            'Readiness: NATS, JetStream and Redis answer; `details.projections` tells whether each projection is behind and any rebuild in progress (no stream counters: this answers without a token); `details.redis` whether Redis refuses the projections` writes for being full (`full`, `since`, `refused`: still 200, reads answer)',
          security: [],
          responses: {
            '200': json(HealthReadySchema, '`{ status: "ready", checks: { nats, jetstream, redis }, details: { storage, projections, redis } }`'),
            '503': json(HealthReadySchema, 'not ready: `{ status: "not_ready", checks, details }` with the failed check `false`'),
          },
        },
      },
      '/openapi.json': {
        get: { operationId: 'openapi', summary: 'This document', security: [], responses: { '200': { description: 'the OpenAPI document' } } },
      },
      '/docs': {
        get: {
          operationId: 'docs',
          summary: 'A page linking this document',
          security: [],
          responses: { '200': { description: 'HTML', content: { 'text/html': { schema: { type: 'string' } } } } },
        },
      },
    },
  };
  withCommonResponses(document.paths as unknown as Parameters<typeof withCommonResponses>[0], unreadable);
  return document;
}

/** A minimal HTML page linking the OpenAPI document. */
export function docsPage(): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Baton operator API</title></head>
<body>
<h1>Baton operator API</h1>
<p>The OpenAPI 3.1 document: <a href="/openapi.json">/openapi.json</a>. Load it in any OpenAPI viewer.</p>
<ul>
<li><code>GET /v1/inbox</code> — the operator inbox</li>
<li><code>GET /v1/stops</code>, <code>GET /v1/projects/{project}/stops/{id}</code>, <code>POST /v1/projects/{project}/stops/{id}/answer</code></li>
<li><code>GET /v1/projects/{project}/runs/{id}</code>, <code>POST /v1/projects/{project}/runs/{id}/answer</code></li>
<li><code>GET /v1/projects/{project}/runs/{id}/answers/{answer_id}</code>, <code>GET /v1/projects/{project}/meshes/{id}/answers/{answer_id}</code> — what became of an answer (applied, refused, pending)</li>
<li><code>GET /v1/projects/{project}/handoffs/{id}</code>, <code>POST /v1/projects/{project}/handoffs/{id}/decision</code>, <code>POST /v1/projects/{project}/handoffs/{id}/abandon</code> — withdraw an open handoff</li>
<li><code>GET /v1/projects/{project}/meshes/{id}</code> — a handoff mesh run: turns, handoffs taken, ignored calls and why, cap, outcome</li>
<li>the same by id alone (<code>/v1/stops/{id}</code>, <code>/v1/runs/{id}</code>, <code>/v1/handoffs/{id}</code>, <code>/v1/meshes/{id}</code>...) when the id is unambiguous among the token's projects; otherwise 409 <code>ambiguous_id</code></li>
<li><code>GET /v1/projects/{project}/webhooks</code> — the project's webhooks: last success, last failure and why, failing since, dead-lettered notices</li>
<li><code>GET /v1/events/stream</code> — server-sent inbox changes</li>
<li><code>GET /v1/projects/{project}</code> — the published definition in short and the kill switch; <code>POST /v1/projects/{project}/pause</code>, <code>POST /v1/projects/{project}/resume</code> — the kill switch (admin)</li>
<li><code>POST /v1/projects/{project}/notices/{notice_id}/redeliver</code> — send a notice to the project's webhooks again</li>
<li><code>GET /v1/projections</code> — the projections: generations, how far behind, rebuilds and their progress</li>
</ul>
<p>A path no route serves is 404 <code>route_not_found</code>; a route asked with another method is 405 <code>method_not_allowed</code> with <code>Allow</code>.</p>
<p>Every <code>/v1</code> route needs <code>Authorization: Bearer &lt;token&gt;</code> (<code>baton token create</code>). The web inbox is at <a href="/inbox">/inbox</a>.</p>
</body></html>
`;
}
