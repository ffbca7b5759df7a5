import { Global, Module } from '@nestjs/common';
import { AuthFailureLimiter } from './auth-failures';
import { ApiAuthGuard } from './auth.guard';
import { AuthService } from './auth.service';

/**
 * Operator tokens, browser sessions, the API guard and the limit on failed authentications (its
 * readiness check `revocations` is in `NotifierReadinessModule`).
 */
@Global()
@Module({
  providers: [AuthService, ApiAuthGuard, AuthFailureLimiter],
  exports: [AuthService, ApiAuthGuard, AuthFailureLimiter],
})
export class AuthModule {}
