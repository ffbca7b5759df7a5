import { Injectable, type NestMiddleware } from '@nestjs/common';

/** The headers that make an answer private to who asked (see {@link PrivateResponses}). */
const PRIVATE_HEADERS: Readonly<Record<string, string>> = { 'Cache-Control': 'private, no-cache', Vary: 'Authorization, Cookie' };

/** Mark an answer private to who asked: the middleware for every `/v1` route, the error filter for refusals written before it ran. */
export function markPrivate(res: { setHeader(name: string, value: string): void }): void {
  for (const [name, value] of Object.entries(PRIVATE_HEADERS)) res.setHeader(name, value);
}

/** Whether a request path is the API's (`/v1/...`), whose every answer is private. */
export const isApiPath = (path: string | undefined): boolean => path !== undefined && (path === '/v1' || path.startsWith('/v1/'));

/** What the middleware reads and changes of a request. */
interface ConditionalRequest {
  headers: Record<string, string | string[] | undefined>;
}

/**
 * Every `/v1` answer is for the token (or session) that asked: `Cache-Control: private, no-cache`
 * keeps shared caches from storing it and makes a browser revalidate before reusing it (a
 * conditional GET with the `ETag` then answers 304 when nothing changed), and `Vary: Authorization,
 * Cookie` says the answer depends on who asked. A refusal written before this runs (the body
 * reader's) gets the same headers from the API's error filter.
 *
 * A conditional request (`If-None-Match`) is always checked against the current answer, which the
 * notifier computes anew for every request: a `Cache-Control: no-cache` or `Pragma: no-cache` the
 * client sends with it (Node's `fetch` adds both to every conditional request) asks caches on the
 * way not to answer for the server, not the server to ignore the validator — so they are not read
 * as "never 304".
 */
@Injectable()
export class PrivateResponses implements NestMiddleware {
  use(req: ConditionalRequest, res: { setHeader(name: string, value: string): void }, next: () => void): void {
    markPrivate(res);
    if (req.headers['if-none-match'] !== undefined) {
      delete req.headers['cache-control'];
      delete req.headers['pragma'];
    }
    next();
  }
}
