/*
 * A body the HTTP server cannot read (malformed JSON, too large, not UTF-8, a type it does not
 * read) is the sender's mistake, but telling an unauthenticated sender so says more than it should
 * and makes a client see 400 or 415 where it first needs to learn it is not signed in. On routes
 * that authenticate, the refusal is therefore kept on the request until the route's guard has
 * authenticated the caller, which then raises it ({@link raiseDeferredBodyError}); a caller that
 * is not authenticated is answered 401 first.
 */

const DEFERRED = Symbol('baton.deferredBodyError');

type WithDeferred = { [DEFERRED]?: unknown };

/** Keep `error` (a body reader's refusal) on `req` until {@link raiseDeferredBodyError}. The first one is kept. */
export function deferBodyError(req: object, error: unknown): void {
  const holder = req as WithDeferred;
  if (holder[DEFERRED] === undefined) holder[DEFERRED] = error;
}

/** Throw the refusal {@link deferBodyError} kept on `req`, if any (a guard calls it once the caller is authenticated). */
export function raiseDeferredBodyError(req: object): void {
  const error = (req as WithDeferred)[DEFERRED];
  if (error !== undefined) throw error;
}

/**
 * An Express error handler placed right after the body readers: on a path `defers` takes, a
 * reader's refusal is kept on the request and the request goes on to its route (whose guard
 * raises it once the caller is authenticated); on any other path it goes on as the error it is.
 */
export function deferBodyErrors(defers: (path: string) => boolean) {
  return (error: unknown, req: { path: string }, _res: unknown, next: (error?: unknown) => void): void => {
    if (!defers(req.path)) return next(error);
    deferBodyError(req, error);
    next();
  };
}
