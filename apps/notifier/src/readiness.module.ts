import { Global, Module } from '@nestjs/common';
import { READINESS_EXTRA_CHECKS, type ReadinessCheck } from '@baton/platform';
import { AuthModule } from './auth/auth.module';
import { AuthService } from './auth/auth.service';
import { ProjectionModule } from './projection/projection.module';
import { StandingBack } from './projection/stand-back';

/**
 * The notifier's own readiness checks, next to the platform's (NATS, JetStream, Redis):
 * `revocations` — the token revocation log can be read (without it every operator token is
 * refused) — and `projection_versions` — it does not stand back from projections a newer release
 * of the notifier built ({@link StandingBack}). Global, so that the platform's `/health/ready`
 * finds them.
 */
@Global()
@Module({
  imports: [AuthModule, ProjectionModule],
  providers: [
    {
      provide: READINESS_EXTRA_CHECKS,
      inject: [AuthService, StandingBack],
      useFactory: (auth: AuthService, standing: StandingBack): ReadinessCheck[] => [
        { name: 'revocations', check: () => auth.revocationsReadable() },
        { name: 'projection_versions', check: () => Promise.resolve(!standing.active) },
      ],
    },
  ],
  exports: [READINESS_EXTRA_CHECKS],
})
export class NotifierReadinessModule {}
