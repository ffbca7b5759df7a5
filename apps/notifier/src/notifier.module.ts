import { DynamicModule, Global, Module, RequestMethod, type MiddlewareConsumer, type NestModule } from '@nestjs/common';
import { ApiModule } from './api/api.module';
import { AuthModule } from './auth/auth.module';
import { RequireReadableBody } from './http/body-type';
import { PrivateResponses } from './http/private-responses';
import { HttpServerLimits } from './http/server-limits';
import { NoticesModule } from './notices/notices.module';
import { loadNotifierConfig, NOTIFIER_CONFIG, type NotifierConfig } from './notifier.config';
import { ProjectionModule } from './projection/projection.module';
import { NotifierReadinessModule } from './readiness.module';
import { WebModule } from './web/web.module';

/** Makes the notifier's own settings injectable everywhere as `@Inject(NOTIFIER_CONFIG)`. */
@Global()
@Module({})
class NotifierConfigModule {
  static forRoot(config: NotifierConfig): DynamicModule {
    return { module: NotifierConfigModule, providers: [{ provide: NOTIFIER_CONFIG, useValue: config }], exports: [NOTIFIER_CONFIG] };
  }
}

/**
 * The notifier: Redis projections kept from the events stream, human action notices (NATS and
 * signed webhooks), the operator API (token-authenticated) and the web inbox.
 */
@Module({})
export class NotifierModule implements NestModule {
  /**
   * A body of a type the notifier does not read is refused 415 (`nosniff` and no `X-Powered-By`: the
   * platform's bootstrap, on every service); `/v1` answers are private to who asked (no shared caching).
   */
  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(RequireReadableBody).forRoutes({ path: '{*path}', method: RequestMethod.ALL });
    consumer.apply(PrivateResponses).forRoutes({ path: 'v1/{*path}', method: RequestMethod.ALL });
  }

  /**
   * The module with its settings read from `env` (NOTIFIER_WEBHOOKS, NOTIFIER_SESSION_TTL_SEC, …).
   * @throws ConfigError naming each bad variable.
   */
  static register(env: Record<string, string | undefined>): DynamicModule {
    return {
      module: NotifierModule,
      imports: [
        NotifierConfigModule.forRoot(loadNotifierConfig(env)),
        ProjectionModule,
        AuthModule,
        NotifierReadinessModule,
        ApiModule,
        WebModule,
        NoticesModule,
      ],
      // The HTTP server's limits (timeouts, connections), set before it listens.
      providers: [HttpServerLimits],
    };
  }
}
