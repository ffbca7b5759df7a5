// The client's request internals (nats 2.29): `RequestOne` is not part of its public API.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const requestModule = require('nats/lib/nats-base-client/request.js') as { RequestOne?: { prototype: RequestOneInternals } };

/**
 * The parts of the client's single-reply request object this module touches (nats 2.29): the
 * reply handler (`resolver`), the clean-up that also rejects the request's promise (`cancel`), the
 * request's timer and the reply multiplexer it is registered with. Checked at run time.
 */
interface RequestOneInternals {
  resolver(err: Error | null, msg: unknown): void;
  cancel(err?: Error): void;
  timer?: { cancel(): void };
  mux: { cancel(request: unknown): void };
  [SETTLED]?: true;
}

/** What {@link skipSettledCancelErrors} did. */
export type SettledRequests = { on: true } | { on: false; reason: string };

const SETTLED = Symbol('baton.requestSettled');
const PATCHED = Symbol.for('baton.settledRequestsPatched');

/**
 * Stop the NATS client from building an error for every request that succeeded.
 *
 * The client ends each single-reply request — a core request, a JetStream API call, a point read —
 * by calling its `cancel()` after the reply resolved the request's promise, and `cancel()` rejects
 * that promise with a new "cancelled" error: the promise is settled already, so the error is
 * thrown away, but building it (with its stack trace) cost 1.4 % of the router's CPU under the
 * bench's load (`NatsError` in the profiles, docs/performance.md). Here a request whose reply (or
 * failure) has been handled is marked settled, and `cancel()` on a settled request only does the
 * clean-up (the timer, the multiplexer) without building the error. A request cancelled before it
 * settled (a timeout, a closed connection) goes through the client's own `cancel()`, unchanged.
 *
 * Patches the client's request class once per process; checks the shape it relies on and does
 * nothing (saying why) when the client is not what it expects. Idempotent.
 */
export function skipSettledCancelErrors(): SettledRequests {
  const proto = requestModule.RequestOne?.prototype as (RequestOneInternals & { [PATCHED]?: true }) | undefined;
  if (!proto || typeof proto.resolver !== 'function' || typeof proto.cancel !== 'function') {
    return { on: false, reason: 'the NATS client has no single-reply request of the expected shape' };
  }
  if (proto[PATCHED]) return { on: true };
  const cancelSource = proto.cancel.toString();
  if (!cancelSource.includes('this.mux.cancel(this)') || !cancelSource.includes('this.deferred.reject(')) {
    return { on: false, reason: "the NATS client's request cancel() is not the one this patch knows" };
  }
  const resolver = proto.resolver;
  const cancel = proto.cancel;
  proto.resolver = function (this: RequestOneInternals, err: Error | null, msg: unknown) {
    this[SETTLED] = true;
    resolver.call(this, err, msg);
  };
  proto.cancel = function (this: RequestOneInternals, err?: Error) {
    if (err !== undefined || !this[SETTLED]) return cancel.call(this, err);
    this.timer?.cancel();
    this.mux.cancel(this);
  };
  proto[PATCHED] = true;
  return { on: true };
}
