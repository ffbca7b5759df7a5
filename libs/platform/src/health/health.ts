import { Controller, Get, HttpCode, HttpException, HttpStatus, Inject, Module, DynamicModule, Optional } from '@nestjs/common';

export {
  JetStreamProbe,
  JETSTREAM_PROBE_CACHE_MS,
  JETSTREAM_PROBE_TIMEOUT_MS,
  type JetStreamProbeConnection,
  type JetStreamProbeOptions,
  type JetStreamProbeResult,
} from './jetstream-probe';

/** A readiness probe: resolves when the dependency answers, rejects (or returns false) when not. */
export type ReadinessCheck = { name: string; check: () => Promise<boolean> };

export const READINESS_CHECKS = Symbol('READINESS_CHECKS');

/**
 * Readiness checks a service adds to the platform's (the notifier: its token revocation log can be
 * read, without which it refuses every operator token). Provided by a global module of the service.
 */
export const READINESS_EXTRA_CHECKS = Symbol('READINESS_EXTRA_CHECKS');

/**
 * Facts a service adds to its readiness answer under `details.<name>` (the notifier: projections
 * being rebuilt and how far). They never decide readiness: a detail that fails or takes longer than
 * the checks is left out. Provided by a global module of the service (token {@link READINESS_DETAILS}).
 */
export type ReadinessDetails = { name: string; details: () => Promise<unknown> };

export const READINESS_DETAILS = Symbol('READINESS_DETAILS');

/** Readiness details every service gives (`storage`: a storage limit refusing its publishes), from {@link HealthModule.register}. */
export const SERVICE_READINESS_DETAILS = Symbol('SERVICE_READINESS_DETAILS');

/**
 * `/health/live` answers 200 while the process runs; `/health/ready` answers 200 only when every
 * readiness check (NATS connected, JetStream answering — {@link JetStreamProbe} —, Redis...)
 * passes within a second, else 503 with the failing names; both carry the service's readiness
 * details, if it provides any.
 */
@Controller('health')
export class HealthController {
  constructor(
    @Inject(READINESS_CHECKS) private readonly platformChecks: ReadinessCheck[],
    @Optional() @Inject(READINESS_DETAILS) private readonly serviceDetails?: ReadinessDetails[],
    @Optional() @Inject(SERVICE_READINESS_DETAILS) private readonly commonDetails?: ReadinessDetails[],
    @Optional() @Inject(READINESS_EXTRA_CHECKS) private readonly extraChecks?: ReadinessCheck[],
  ) {}

  private get checks(): ReadinessCheck[] {
    return [...this.platformChecks, ...(this.extraChecks ?? [])];
  }

  private get details(): ReadinessDetails[] {
    return [...(this.commonDetails ?? []), ...(this.serviceDetails ?? [])];
  }

  @Get('live')
  @HttpCode(200)
  live(): { status: 'ok' } {
    return { status: 'ok' };
  }

  @Get('ready')
  async ready(): Promise<{ status: 'ready'; checks: Record<string, boolean>; details?: Record<string, unknown> }> {
    const { ready, checks, ...extra } = await this.readiness();
    if (!ready) throw new HttpException({ status: 'not_ready', checks, ...extra }, HttpStatus.SERVICE_UNAVAILABLE);
    return { status: 'ready', checks, ...extra };
  }

  /** What `/health/ready` answers, as data: every check's result (each given a second) and the details. */
  async readiness(): Promise<{ ready: boolean; checks: Record<string, boolean>; details?: Record<string, unknown> }> {
    const details = this.collectDetails();
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
    return { ready: results.every(([, ok]) => ok), checks: Object.fromEntries(results), ...(await details) };
  }

  /** `{ details }` from the providers that answered within a second (nothing when none is provided). */
  private async collectDetails(): Promise<{ details?: Record<string, unknown> }> {
    if (!this.details || this.details.length === 0) return {};
    const entries = await Promise.all(
      this.details.map(async ({ name, details }) => {
        try {
          const value = await Promise.race([details(), new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 1000).unref())]);
          return value === undefined ? null : ([name, value] as [string, unknown]);
        } catch {
          return null;
        }
      }),
    );
    return { details: Object.fromEntries(entries.filter((e): e is [string, unknown] => e !== null)) };
  }
}

@Module({})
export class HealthModule {
  /** `details`: facts every service adds to its readiness answer (never deciding it), before the service's own {@link READINESS_DETAILS}. */
  static register(checks: ReadinessCheck[] | (() => ReadinessCheck[]), details: ReadinessDetails[] = []): DynamicModule {
    return {
      module: HealthModule,
      controllers: [HealthController],
      providers: [
        { provide: READINESS_CHECKS, useFactory: () => (typeof checks === 'function' ? checks() : checks) },
        { provide: SERVICE_READINESS_DETAILS, useValue: details },
      ],
    };
  }
}
