import { ArgumentsHost, Catch, ExceptionFilter, HttpServer } from '@nestjs/common';
import { BaseExceptionFilter } from '@nestjs/core';
import { throwError, type Observable } from 'rxjs';

/**
 * The one global exception filter of a hybrid (HTTP + JetStream) Baton service. For messages it
 * passes the error through unchanged, so the transport can tell a `TransientError` (nak with
 * delay) from a `PoisonError` or zod failure (dead letter); for HTTP it answers as Nest does.
 * Installed by `runService` before the app initialises (a filter registered on the microservice
 * afterwards would be ignored).
 */
@Catch()
export class HybridExceptionFilter extends BaseExceptionFilter {
  /** @param http a service's own HTTP filter (typed error bodies); Nest's default when absent. */
  constructor(
    httpAdapter: HttpServer,
    private readonly http?: ExceptionFilter,
  ) {
    super(httpAdapter);
  }

  override catch(exception: unknown, host: ArgumentsHost): Observable<never> | void {
    if (host.getType() === 'rpc') return throwError(() => exception);
    if (this.http) return this.http.catch(exception, host) as void;
    return super.catch(exception, host);
  }
}
