import { Catch, type RpcExceptionFilter } from '@nestjs/common';
import { throwError, type Observable } from 'rxjs';

/**
 * Passes handler errors through unchanged so {@link JetStreamServer} can classify them
 * (TransientError → nak with delay, PoisonError / ZodError → dead letter + term). Nest's default
 * RPC filter replaces every error that is not an RpcException with a generic object, which the
 * transport can only treat as transient. Install it with
 * `app.useGlobalFilters(new JetStreamExceptionFilter())`.
 */
@Catch()
export class JetStreamExceptionFilter implements RpcExceptionFilter<unknown> {
  catch(exception: unknown): Observable<never> {
    return throwError(() => exception);
  }
}
