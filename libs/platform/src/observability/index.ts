// W3C trace context and the traced NATS handle live in the message-edge library (@baton/eventstore),
// which the SDK uses without this platform; re-exported here for the services.
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
  instrumentNats,
} from '@baton/eventstore';
export type { HeaderRecord, InstrumentNatsOptions, JetStreamPublished } from '@baton/eventstore';
export { BatonMetrics, MetricName, messageTypeOf, runnerInstrumentation } from './metrics';
export type { BatonMetricsOptions, ConsumerSamplerOptions, HandledOutcome } from './metrics';
export { registerProjectionGauges, countOpenHandoffs, OPEN_HANDOFF_STATUSES } from './projection-gauges';
export type { ProjectionGaugeOptions } from './projection-gauges';
export { MetricsModule, MetricsController, METRICS, PROMETHEUS_CONTENT_TYPE } from './metrics.module';
export { httpMetricsMiddleware } from './http-metrics';
