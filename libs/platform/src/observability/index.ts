export { BatonMetrics, MetricName, SERVICE_METRICS, exposesMetric, messageTypeOf, runnerInstrumentation } from './metrics';
export type { BatonMetricsOptions, ConsumerSamplerOptions, HandledOutcome, MetricKey } from './metrics';
export { registerProjectionGauges, countOpenHandoffs } from './projection-gauges';
export { MetricsModule, MetricsController, METRICS, PROMETHEUS_CONTENT_TYPE } from './metrics.module';
export { httpMetricsMiddleware } from './http-metrics';
export { metricSample, metricSamples, type LabelMatch } from './exposition';
export { StorageFullWatch, type StorageFullCondition, type StorageFullLog, type StorageFullWatchOptions, type StorageStatus } from './storage-full';
export { FullWatch, type FullCondition, type FullWatchLog, type FullWatchOptions, type FullWatchWords } from './full-watch';
export { RedisFullWatch, type RedisFullStatus, type RedisFullWatchOptions } from './redis-full';
