export {
  TRACEPARENT_HEADER,
  TRACESTATE_HEADER,
  W3CTraceparentPropagator,
  AsyncLocalContextManager,
  installTracing,
  parseTraceparent,
  formatTraceparent,
  newTraceparent,
  newTraceId,
  newSpanId,
  traceIdFromHeaders,
  contextFromHeaders,
  withTraceFromHeaders,
  currentTraceId,
  traceHeaders,
} from './trace-context';
export type { HeaderRecord } from './trace-context';
export { instrumentNats } from './instrument-nats';
export type { InstrumentNatsOptions } from './instrument-nats';
export { BatonMetrics, MetricName, messageTypeOf, runnerInstrumentation } from './metrics';
export type { BatonMetricsOptions, ConsumerSamplerOptions, HandledOutcome } from './metrics';
export { registerProjectionGauges, countOpenHandoffs, OPEN_HANDOFF_STATUSES } from './projection-gauges';
export type { ProjectionGaugeOptions } from './projection-gauges';
export { MetricsModule, MetricsController, METRICS, PROMETHEUS_CONTENT_TYPE } from './metrics.module';
export { httpMetricsMiddleware } from './http-metrics';
