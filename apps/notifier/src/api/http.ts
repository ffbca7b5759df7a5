import {
  ArgumentsHost,
  Catch,
  ExceptionFilter,
  HttpException,
  HttpStatus,
  Injectable,
  Logger,
  NotFoundException,
  UseInterceptors,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import { METHODS } from 'node:http';
import type { Observable } from 'rxjs';
import { rejectionFromZod } from '@baton/contracts';
import { InvalidCursorError, RedisFullError, RedisUnavailableError } from '@baton/projections';
import { z } from 'zod';
import { isApiPath, markPrivate } from '../http/private-responses';

/** The body of every error the operator API answers: a stable code, a message, the offending fields. */
export interface ApiErrorBody {
  error: { code: string; message: string; issues: { path: string; message: string }[]; details?: Record<string, unknown> };
}

/** An API refusal with its HTTP status and typed body. Controllers throw it; the filter writes it. */
export class ApiError extends HttpException {
  constructor(status: number, code: string, message: string, issues: { path: string; message: string }[] = [], details?: Record<string, unknown>) {
    const body: ApiErrorBody = { error: { code, message, issues, ...(details ? { details } : {}) } };
    super(body, status);
    this.name = 'ApiError';
  }
}

export const notFound = (what: string, id: string) => new ApiError(HttpStatus.NOT_FOUND, 'not_found', `${what} ${id} does not exist`);

/** Parse untrusted input with a zod schema; a failure is a 400 `schema_violation` naming each field. */
export function parseOr400<S extends z.ZodType>(schema: S, input: unknown): z.infer<S> {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const rejection = rejectionFromZod(parsed.error);
  // A parameter or field the route does not take is named by its own path (`foo`, not `(root)`),
  // as the routes that take no query name theirs: a client reads the offender from `issues[].path`.
  // (The rejection's issues are the zod issues', in order.)
  const named = rejection.issues
    .flatMap((described, index) => {
      const issue = parsed.error.issues[index];
      if (issue?.code !== 'unrecognized_keys') return [repeated(input, described, issue)];
      return issue.keys.map((key) => ({ path: [...issue.path.map(String), key.slice(0, 100)].join('.'), message: 'Unrecognized key' }));
    })
    .slice(0, 20);
  const first = named[0];
  throw new ApiError(HttpStatus.BAD_REQUEST, rejection.code, first ? `${first.path}: ${first.message}` : rejection.message, named);
}

/**
 * A top-level field that came as a list where the schema takes one value (a query parameter given
 * twice, `?limit=1&limit=2`) is said to be repeated, not to be of the wrong shape.
 */
function repeated(input: unknown, described: { path: string; message: string }, issue: z.core.$ZodIssue | undefined) {
  // A list the schema takes is refused for its values (`why.0`) or its length (an alternative of the
  // union took the array's shape), not for being a list.
  // An enum or literal given a list says `invalid_value` (`?order=newest&order=urgent`), as a list
  // where a string goes says `invalid_type`.
  const shapeOnly = (i: z.core.$ZodIssue): boolean =>
    i.code === 'invalid_type' || i.code === 'invalid_value' || (i.code === 'invalid_union' && i.errors.every((alt) => alt.every(shapeOnly)));
  if (issue === undefined || !shapeOnly(issue)) return described;
  const path = issue.path;
  if (path.length !== 1 || typeof input !== 'object' || input === null) return described;
  const value = (input as Record<PropertyKey, unknown>)[path[0]!];
  return Array.isArray(value) ? { path: described.path, message: `${String(path[0])} is given ${value.length} times; give it once` } : described;
}

/** Each parameter's schema wrapped in an object of that one field, made once per schema and name. */
const paramSchemas = new WeakMap<z.ZodType, Map<string, z.ZodType>>();

/**
 * Parse a path parameter (`:project`, `:id`, `:answer_id`…): a failure is a 400
 * `schema_violation` whose issue names the parameter (`issues[].path` is its name).
 */
export function parseParam<S extends z.ZodType>(name: string, schema: S, value: unknown): z.infer<S> {
  let byName = paramSchemas.get(schema);
  if (byName === undefined) paramSchemas.set(schema, (byName = new Map()));
  let wrapped = byName.get(name);
  if (wrapped === undefined) byName.set(name, (wrapped = z.object({ [name]: schema })));
  return (parseOr400(wrapped, { [name]: value }) as Record<string, z.infer<S>>)[name];
}

/**
 * Refuses (400 `schema_violation`) a query parameter on a route that takes none — a record, an
 * answer, the projections report — as the listings refuse one they do not know: a client's
 * `?at=5` on a run must not silently get the present.
 */
@Injectable()
export class NoQueryInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const query = (context.switchToHttp().getRequest<{ query?: Record<string, unknown> }>().query ?? {}) as Record<string, unknown>;
    const given = Object.keys(query);
    if (given.length > 0) {
      throw new ApiError(
        HttpStatus.BAD_REQUEST,
        'schema_violation',
        `this route takes no query parameters; got ${given.map((name) => JSON.stringify(name.slice(0, 100))).join(', ')}`,
        given.map((name) => ({ path: name.slice(0, 100), message: 'Unrecognized key' })),
      );
    }
    return next.handle();
  }
}

/** A route that takes no query parameters ({@link NoQueryInterceptor}). */
export const NoQuery = () => UseInterceptors(NoQueryInterceptor);

/** What {@link methodNotAllowed} reads of an Express request: its method, path and the app's routes. */
interface RoutedRequest {
  method?: string;
  path?: string;
  app?: { router?: { stack?: ReadonlyArray<{ route?: { path?: unknown; methods?: Record<string, boolean> }; match?(path: string): boolean }> } };
  /** Express's matched route; set here for a 405, so the request metrics label it with the route it matched. */
  route?: { path?: unknown };
}

/**
 * When no route took a request, whether its path is a route under other methods (a 405 with the
 * methods it takes, GET bringing HEAD) rather than no route at all (404). Read from the HTTP
 * server's own route table, so it cannot drift from the routes; null when the table cannot be read.
 */
function methodNotAllowed(req: RoutedRequest): { error: ApiError; allowed: string[]; route: string | null } | null {
  const stack = req.app?.router?.stack;
  const path = req.path;
  const method = req.method?.toUpperCase();
  if (!stack || path === undefined || method === undefined) return null;
  const allowed = new Set<string>();
  let route: string | null = null;
  for (const layer of stack) {
    const methods = layer.route?.methods;
    if (!methods || typeof layer.match !== 'function') continue;
    const taken = Object.entries(methods).filter(([, on]) => on);
    // A route of every method is a middleware mounted on all paths (a Nest `forRoutes` of ALL), not a route.
    if (taken.length >= METHODS.length || !layer.match(path)) continue;
    if (route === null && typeof layer.route?.path === 'string') route = layer.route.path;
    for (const [name] of taken) {
      if (name === '_all') continue;
      allowed.add(name.toUpperCase());
      if (name === 'get') allowed.add('HEAD');
    }
  }
  if (allowed.size === 0 || allowed.has(method)) return null;
  const list = [...allowed].sort();
  return {
    allowed: list,
    route,
    error: new ApiError(HttpStatus.METHOD_NOT_ALLOWED, 'method_not_allowed', `${method} is not a method of ${path}; it takes ${list.join(', ')}`, [], {
      allowed: list,
    }),
  };
}

/** HTTP status for a domain / ledger error kind. */
export function statusForKind(kind: string): number {
  switch (kind) {
    case 'wrong_state':
      return HttpStatus.CONFLICT;
    case 'forbidden':
      return HttpStatus.FORBIDDEN;
    case 'not_found':
      return HttpStatus.NOT_FOUND;
    case 'unavailable':
      return HttpStatus.SERVICE_UNAVAILABLE;
    case 'internal':
      return HttpStatus.INTERNAL_SERVER_ERROR;
    default:
      return HttpStatus.BAD_REQUEST;
  }
}

/** Seconds a client should wait before retrying a ledger command the ledger did not answer (the `Retry-After` of its 503). */
export const LEDGER_RETRY_AFTER_SEC = 2;

/**
 * The API's answer to a ledger command's refusal: the ledger's code with the status of its kind
 * (`rejected` → 400), `details` added. When no ledger answered (kind `unavailable`: `timeout`,
 * `no_responders`, the store busy) the command may have been applied all the same: the 503 names
 * the `idempotency_key` it was sent with (generated by the API when the request had none) and a
 * `Retry-After`, so the client retries the same command safely.
 */
export function ledgerRefusal(
  error: { code: string; kind: string; message: string; details?: Record<string, unknown> },
  key: string,
  details: Record<string, unknown>,
): ApiError {
  const status = error.kind === 'rejected' ? HttpStatus.BAD_REQUEST : statusForKind(error.kind);
  const retry = error.kind === 'unavailable' ? { idempotency_key: key, retry_after_sec: LEDGER_RETRY_AFTER_SEC } : {};
  return new ApiError(status, error.code, error.message, [], { ...(error.details ?? {}), ...details, ...retry });
}

/** Seconds a client should wait before retrying when Redis did not answer (the `Retry-After` of a 503 `projections_unavailable`). */
export const PROJECTIONS_RETRY_AFTER_SEC = 1;

/**
 * The refusal for a request that needed Redis (projections, tokens, sessions) while Redis did not
 * answer within `REDIS_COMMAND_TIMEOUT_MS` or refused the connection: 503
 * `projections_unavailable`, or null when `error` is something else.
 */
export function projectionsUnavailable(error: unknown): ApiError | null {
  const unavailable = RedisUnavailableError.of(error);
  if (!unavailable) return null;
  return new ApiError(
    HttpStatus.SERVICE_UNAVAILABLE,
    'projections_unavailable',
    'the projections store (Redis) did not answer in time; try again shortly',
    [],
    { retry_after_sec: PROJECTIONS_RETRY_AFTER_SEC },
  );
}

/** Seconds a client should wait before retrying a request Redis refused for being full (the `Retry-After` of a 503 `redis_full`): room is made by a person. */
export const REDIS_FULL_RETRY_AFTER_SEC = 30;

/**
 * The refusal for a request whose write Redis refused because it is full (maxmemory reached under
 * `noeviction`: a web sign-in's session, say): 503 `redis_full`, or null when `error` is something
 * else. Reads still answer; the operators raise Redis's maxmemory (docs/sre.md, What fills Redis).
 */
export function redisFull(error: unknown): ApiError | null {
  if (RedisFullError.of(error) === null) return null;
  return new ApiError(
    HttpStatus.SERVICE_UNAVAILABLE,
    'redis_full',
    'the projections store (Redis) is full and refuses writes; reads still answer — try again once the operators made room',
    [],
    { retry_after_sec: REDIS_FULL_RETRY_AFTER_SEC },
  );
}

/**
 * Writes every HTTP error as `{ error: { code, message, issues } }`: ApiErrors as they are; a bad
 * cursor as 400 `schema_violation`; Redis not answering (a command timeout, a refused connection)
 * as 503 `projections_unavailable`; a write Redis refused for being full as 503 `redis_full`; every refusal whose details carry `retry_after_sec` (that one, 503
 * `answer_outcome_unknown`, 429s) with that many seconds as `Retry-After`; Express's own errors (a body that is not
 * UTF-8 → `invalid_utf8`, a charset Express cannot read → 415 `unsupported_charset`, malformed
 * JSON body → `malformed_json`, body over the limit → `payload_too_large`, a Content-Encoding it
 * cannot undo → 415 `unsupported_encoding`, any other body it cannot read → 400 `malformed_body`)
 * and unknown routes typed too;
 * anything else as 500 `internal_error` (logged, never leaked).
 */
@Catch()
export class ApiExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('notifier-api');

  catch(exception: unknown, host: ArgumentsHost): void {
    if (host.getType() !== 'http') throw exception;
    const http = host.switchToHttp();
    const response = http.getResponse<{
      status(code: number): { json(body: unknown): void };
      setHeader(name: string, value: string): void;
      headersSent?: boolean;
    }>();
    const request = http.getRequest<RoutedRequest>();
    const wrongMethod = exception instanceof NotFoundException ? methodNotAllowed(request) : null;
    const [status, body] = wrongMethod ? [wrongMethod.error.getStatus(), wrongMethod.error.getResponse() as ApiErrorBody] : this.toBody(exception);
    if (response.headersSent) return;
    // A refusal written before the API's middleware ran (the body reader's) is as private as any answer.
    if (isApiPath(request.path)) markPrivate(response);
    if (wrongMethod) {
      response.setHeader('Allow', wrongMethod.allowed.join(', '));
      // The path is a route (under other methods): the request metrics name it, not `unmatched`.
      if (wrongMethod.route !== null) request.route = { path: wrongMethod.route };
    }
    const retryAfter = (body as ApiErrorBody).error?.details?.['retry_after_sec'];
    if (typeof retryAfter === 'number' && retryAfter > 0) response.setHeader('Retry-After', String(Math.ceil(retryAfter)));
    response.status(status).json(body);
  }

  private toBody(exception: unknown): [number, ApiErrorBody | object] {
    if (exception instanceof ApiError) return [exception.getStatus(), exception.getResponse() as ApiErrorBody];
    const unavailable = projectionsUnavailable(exception);
    if (unavailable) {
      this.logger.warn(`redis unavailable: ${(exception as Error).message}`);
      return [unavailable.getStatus(), unavailable.getResponse() as ApiErrorBody];
    }
    const full = redisFull(exception);
    if (full) {
      this.logger.warn(`redis full: a request's write was refused: ${(exception as Error).message}`);
      return [full.getStatus(), full.getResponse() as ApiErrorBody];
    }
    if (exception instanceof InvalidCursorError) {
      return [
        HttpStatus.BAD_REQUEST,
        { error: { code: 'schema_violation', message: `cursor: ${exception.message}`, issues: [{ path: 'cursor', message: exception.message }] } },
      ];
    }
    if (exception instanceof HttpException) {
      const status = exception.getStatus();
      const raw = exception.getResponse();
      // Health checks answer their own bodies.
      if (typeof raw === 'object' && raw !== null && 'checks' in raw) return [status, raw];
      const message = typeof raw === 'string' ? raw : String((raw as { message?: unknown }).message ?? exception.message);
      // A path no route takes (Nest's NotFoundException: the only one thrown here) is told apart from
      // a record that does not exist (`not_found`, the routes' own ApiError): a wrong base URL or a
      // misspelt path is not a missing run.
      const code =
        status === HttpStatus.PAYLOAD_TOO_LARGE
          ? 'payload_too_large'
          : status === HttpStatus.NOT_FOUND
            ? exception instanceof NotFoundException
              ? 'route_not_found'
              : 'not_found'
            : status === HttpStatus.BAD_REQUEST && /JSON/i.test(message)
              ? 'malformed_json'
              : status === HttpStatus.BAD_REQUEST
                ? 'schema_violation'
                : 'http_error';
      // A path segment that is not percent-encoding (`/v1/runs/%`): the router could not read the
      // route's parameters, so the issue names the path rather than one of them.
      const issues =
        code === 'schema_violation' && message.startsWith('Failed to decode param')
          ? [{ path: '(path)', message: 'a path segment is not valid percent-encoding' }]
          : [];
      return [status, { error: { code, message, issues } }];
    }
    const typeField = typeof exception === 'object' && exception !== null ? (exception as { type?: unknown; status?: unknown }) : {};
    if (typeField.type === 'charset.unsupported')
      return [HttpStatus.UNSUPPORTED_MEDIA_TYPE, { error: { code: 'unsupported_charset', message: (exception as Error).message, issues: [] } }];
    if (typeField.type === 'entity.invalid_utf8')
      return [HttpStatus.BAD_REQUEST, { error: { code: 'invalid_utf8', message: (exception as Error).message, issues: [] } }];
    if (typeField.type === 'entity.parse.failed')
      return [HttpStatus.BAD_REQUEST, { error: { code: 'malformed_json', message: 'the body is not valid JSON', issues: [] } }];
    if (typeField.type === 'entity.too.large')
      return [HttpStatus.PAYLOAD_TOO_LARGE, { error: { code: 'payload_too_large', message: 'the body is too large', issues: [] } }];
    // The body reader's other refusals (a Content-Encoding it cannot undo, a compressed body that
    // does not inflate, a form with too many or too deeply nested fields, a body cut short) come
    // as client errors marked safe to show: each is the client's, typed, never a 500.
    const bodyStatus = typeof typeField.status === 'number' && (exception as { expose?: unknown }).expose === true ? typeField.status : 0;
    if (bodyStatus >= 400 && bodyStatus < 500) {
      const message = (exception as Error).message;
      if (bodyStatus === HttpStatus.PAYLOAD_TOO_LARGE) return [bodyStatus, { error: { code: 'payload_too_large', message, issues: [] } }];
      if (bodyStatus === HttpStatus.UNSUPPORTED_MEDIA_TYPE) return [bodyStatus, { error: { code: 'unsupported_encoding', message, issues: [] } }];
      return [HttpStatus.BAD_REQUEST, { error: { code: 'malformed_body', message, issues: [] } }];
    }
    this.logger.error(exception instanceof Error ? (exception.stack ?? exception.message) : String(exception));
    return [HttpStatus.INTERNAL_SERVER_ERROR, { error: { code: 'internal_error', message: 'the request failed; see the notifier log', issues: [] } }];
  }
}
