export { BatonMetrics, MetricName, messageTypeOf, runnerInstrumentation } from './metrics';
export type { BatonMetricsOptions, ConsumerSamplerOptions, HandledOutcome } from './metrics';
export { registerProjectionGauges, countOpenHandoffs } from './projection-gauges';
export { MetricsModule, MetricsController, METRICS, PROMETHEUS_CONTENT_TYPE } from './metrics.module';
export { httpMetricsMiddleware } from './http-metrics';
export { metricSample, metricSamples, type LabelMatch } from './exposition';
