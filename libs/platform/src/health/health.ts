import { Controller, Get, HttpCode, HttpException, HttpStatus, Inject, Module, DynamicModule } from '@nestjs/common';

/** A readiness probe: resolves when the dependency answers, rejects (or returns false) when not. */
export type ReadinessCheck = { name: string; check: () => Promise<boolean> };

export const READINESS_CHECKS = Symbol('READINESS_CHECKS');

/**
 * `/health/live` answers 200 while the process runs; `/health/ready` answers 200 only when every
 * readiness check (NATS, Redis...) passes within a second, else 503 with the failing names.
 */
@Controller('health')
export class HealthController {
  constructor(@Inject(READINESS_CHECKS) private readonly checks: ReadinessCheck[]) {}

  @Get('live')
  @HttpCode(200)
  live(): { status: 'ok' } {
    return { status: 'ok' };
  }

  @Get('ready')
  async ready(): Promise<{ status: 'ready'; checks: Record<string, boolean> }> {
    const results = await Promise.all(
      this.checks.map(async ({ name, check }) => {
        try {
          const ok = await Promise.race([check(), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 1000).unref())]);
          return [name, ok] as const;
        } catch {
          return [name, false] as const;
        }
      }),
    );
    const checks = Object.fromEntries(results);
    if (results.some(([, ok]) => !ok)) {
      throw new HttpException({ status: 'not_ready', checks }, HttpStatus.SERVICE_UNAVAILABLE);
    }
    return { status: 'ready', checks };
  }
}

@Module({})
export class HealthModule {
  static register(checks: ReadinessCheck[] | (() => ReadinessCheck[])): DynamicModule {
    return {
      module: HealthModule,
      controllers: [HealthController],
      providers: [{ provide: READINESS_CHECKS, useFactory: () => (typeof checks === 'function' ? checks() : checks) }],
    };
  }
}
