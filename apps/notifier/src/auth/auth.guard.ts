import { CanActivate, createParamDecorator, ExecutionContext, HttpStatus, Injectable } from '@nestjs/common';
import { ApiError } from '../api/http';
import { AuthService } from './auth.service';
import type { HttpRequest } from './http-types';
import type { Principal } from './roles';

/**
 * Guards the JSON API (`/v1/...`). Every request must authenticate: `Authorization: Bearer
 * <token>`, or — for GET requests only (reads and the event stream the inbox page opens) — the
 * browser session cookie. A POST never authenticates by cookie alone, so the JSON API needs no
 * CSRF token; browser forms post to the web routes, which check one. 401 `unauthenticated`
 * otherwise (with `WWW-Authenticate: Bearer`).
 */
@Injectable()
export class ApiAuthGuard implements CanActivate {
  constructor(private readonly auth: AuthService) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const req = context.switchToHttp().getRequest<HttpRequest>();
    const found = await this.auth.authenticate(req, { allowSession: req.method === 'GET' || req.method === 'HEAD' });
    if (!found) {
      context.switchToHttp().getResponse<{ setHeader(name: string, value: string): void }>().setHeader('WWW-Authenticate', 'Bearer realm="baton"');
      throw new ApiError(HttpStatus.UNAUTHORIZED, 'unauthenticated', 'send Authorization: Bearer <token> (create one with `baton token create`)');
    }
    req.principal = found.principal;
    if (found.session) req.session = found.session;
    return true;
  }
}

/** The authenticated caller (set by {@link ApiAuthGuard} or the web guard). */
export const Caller = createParamDecorator((_data: unknown, context: ExecutionContext): Principal => {
  const principal = context.switchToHttp().getRequest<HttpRequest>().principal;
  if (!principal) throw new ApiError(HttpStatus.UNAUTHORIZED, 'unauthenticated', 'not authenticated');
  return principal;
});
