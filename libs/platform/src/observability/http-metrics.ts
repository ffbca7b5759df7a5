import type { BatonMetrics } from './metrics';

/** The parts of an Express request and response the middleware reads. */
export interface HttpRequestLike {
  method: string;
  baseUrl?: string;
  route?: { path?: unknown };
}
interface HttpResponseLike {
  statusCode: number;
  once(event: 'finish' | 'close', listener: () => void): unknown;
}

/**
 * Express middleware timing every HTTP request into `baton_http_request_duration_seconds`
 * (method, matched route pattern or `unmatched`, status code). The route is the pattern
 * (`/api/runs/:id`), never the raw path, so the label set stays bounded.
 */
export function httpMetricsMiddleware(metrics: BatonMetrics) {
  return (req: HttpRequestLike, res: HttpResponseLike, next: () => void): void => {
    const end = metrics.httpDuration.startTimer();
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      end({ method: req.method, route: routeLabel(req), status_code: String(res.statusCode) });
    };
    res.once('finish', finish);
    res.once('close', finish);
    next();
  };
}

/** A catch-all pattern (`{*path}`, `*`, `(.*)`, or one under a prefix: `/v1/{*path}`): middleware bound to every path (under it), not a route a request matched. */
const CATCH_ALL = /(?:^|\/)(?:\{\*[^}]*\}|\*|\(\.\*\))$/;

/**
 * The `route` label of a request: the pattern of the route it matched, or `unmatched` — also when
 * the only "route" Express saw was a catch-all that middleware is bound to (`forRoutes('{*path}')`),
 * which a request matching no route would otherwise be labelled with.
 */
export function routeLabel(req: HttpRequestLike): string {
  const path = req.route?.path;
  if (typeof path !== 'string' || CATCH_ALL.test(path)) return 'unmatched';
  return `${req.baseUrl ?? ''}${path}`;
}
