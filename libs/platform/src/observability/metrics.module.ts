import { Controller, DynamicModule, Get, Global, Header, Inject, Module } from '@nestjs/common';
import type { BatonMetrics } from './metrics';

/** Injection token of the service's {@link BatonMetrics} (`@Inject(METRICS)`). */
export const METRICS = Symbol('BATON_METRICS');

/** The Prometheus exposition content type (text format 0.0.4). */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** `GET /metrics`: the service's registry in the Prometheus text format. */
@Controller()
export class MetricsController {
  constructor(@Inject(METRICS) private readonly metrics: BatonMetrics) {}

  @Get('metrics')
  @Header('Content-Type', PROMETHEUS_CONTENT_TYPE)
  @Header('Cache-Control', 'no-store')
  async expose(): Promise<string> {
    return (await this.metrics.expose()).body;
  }
}

/** Serves `GET /metrics` and makes the metrics injectable everywhere as `@Inject(METRICS)`. */
@Global()
@Module({})
export class MetricsModule {
  static forRoot(metrics: BatonMetrics): DynamicModule {
    return { module: MetricsModule, controllers: [MetricsController], providers: [{ provide: METRICS, useValue: metrics }], exports: [METRICS] };
  }
}
