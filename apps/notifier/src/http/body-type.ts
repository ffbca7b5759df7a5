import { HttpStatus, Injectable, type NestMiddleware } from '@nestjs/common';
import { deferBodyError } from '@baton/platform';
import { ApiError } from '../api/http';
import { isApiPath } from './private-responses';

/** The body types the notifier reads: JSON (the API) and forms (the web inbox, and the API too). */
export const BODY_TYPES = ['application/json', 'application/x-www-form-urlencoded'] as const;

/** What the middleware needs of an Express request: `is` answers null when there is no body. */
interface TypedRequest {
  path: string;
  is(types: readonly string[]): string | false | null;
  headers: { 'content-type'?: string; 'content-length'?: string; 'transfer-encoding'?: string };
}

/**
 * A request whose body is of a type the notifier does not read — `text/plain`, or no
 * `Content-Type` at all — is refused 415 `unsupported_media_type` naming the types it reads.
 * Without this the body readers skip such a body, the route sees no fields at all, and the client
 * is told every required field is missing. A request without a body (no `Transfer-Encoding`, and
 * no `Content-Length` or 0) is not checked.
 */
@Injectable()
export class RequireReadableBody implements NestMiddleware {
  use(req: TypedRequest, _res: unknown, next: () => void): void {
    const { 'content-length': length, 'transfer-encoding': encoding } = req.headers;
    if (encoding === undefined && (length === undefined || length === '0')) return next();
    if (req.is(BODY_TYPES) !== false) return next();
    const sent = req.headers['content-type'];
    const refusal = new ApiError(
      HttpStatus.UNSUPPORTED_MEDIA_TYPE,
      'unsupported_media_type',
      `${sent === undefined ? 'a body without a Content-Type' : `a body of type ${JSON.stringify(sent)}`} is not read; send ${BODY_TYPES.join(' or ')}`,
      [],
      { accepted: [...BODY_TYPES] },
    );
    // The JSON API authenticates first: its guard raises the refusal once the caller is known.
    if (isApiPath(req.path)) {
      deferBodyError(req, refusal);
      return next();
    }
    throw refusal;
  }
}

const DECIMAL = /^\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\s*$/;

/** The number a form field's text writes in decimal (`"2000"`, `" 2.5e3 "`), or `undefined` for any other text (empty, hex, `Infinity`…). */
export function decimalOf(text: string): number | undefined {
  return DECIMAL.test(text) ? Number(text) : undefined;
}

/**
 * A form's fields are all text, so a number the JSON body carries as a number (`cap`) arrives as
 * `"2000"` from a form: for a form body (`contentType`), each of `fields` that is a decimal text
 * is read as the number it writes. Anything else — a JSON body, a text that is not a number — is
 * left as sent, for the route's schema to judge.
 */
export function formNumbers(contentType: string | undefined, body: unknown, fields: readonly string[]): unknown {
  if (contentType === undefined || !/^application\/x-www-form-urlencoded\b/i.test(contentType.trim())) return body;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return body;
  const out: Record<string, unknown> = { ...(body as Record<string, unknown>) };
  for (const field of fields) {
    const value = out[field];
    const number = typeof value === 'string' ? decimalOf(value) : undefined;
    if (number !== undefined) out[field] = number;
  }
  return out;
}
