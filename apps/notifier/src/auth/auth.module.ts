import { Global, Module } from '@nestjs/common';
import { READINESS_EXTRA_CHECKS, type ReadinessCheck } from '@baton/platform';
import { AuthFailureLimiter } from './auth-failures';
import { ApiAuthGuard } from './auth.guard';
import { AuthService } from './auth.service';

/**
 * Operator tokens, browser sessions, the API guard and the limit on failed authentications; and the
 * readiness check `revocations` (the token revocation log can be read). Global, so that the
 * platform's `/health/ready` finds that check.
 */
@Global()
@Module({
  providers: [
    AuthService,
    ApiAuthGuard,
    AuthFailureLimiter,
    {
      provide: READINESS_EXTRA_CHECKS,
      inject: [AuthService],
      useFactory: (auth: AuthService): ReadinessCheck[] => [{ name: 'revocations', check: () => auth.revocationsReadable() }],
    },
  ],
  exports: [AuthService, ApiAuthGuard, AuthFailureLimiter, READINESS_EXTRA_CHECKS],
})
export class AuthModule {}
