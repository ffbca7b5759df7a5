export { JetStreamServer, JetStreamPullError, JETSTREAM_TRANSPORT, NatsServerError } from './jetstream.server';
export type {
  JetStreamServerOptions,
  JetStreamConsumerSettings,
  JetStreamConsumerBinding,
  JetStreamPatternExtras,
  JetStreamServerEvents,
  RequestErrorReply,
} from './jetstream.server';
export { JetStreamContext, NatsRequestContext } from './jetstream.context';
export { JetStreamClient, RequestError } from './jetstream.client';
export type { PublishOptions, PublishAck } from './jetstream.client';
export { JetStreamExceptionFilter } from './jetstream.exception-filter';
export { subjectMatches, resolvePattern, durableNameFor } from './subject';
export { HybridExceptionFilter } from './hybrid-exception.filter';
