import type { BatonMetrics } from './metrics';

/** The parts of an Express request and response the middleware reads. */
interface HttpRequestLike {
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
      const path = req.route && typeof req.route.path === 'string' ? `${req.baseUrl ?? ''}${req.route.path}` : 'unmatched';
      end({ method: req.method, route: path, status_code: String(res.statusCode) });
    };
    res.once('finish', finish);
    res.once('close', finish);
    next();
  };
}
