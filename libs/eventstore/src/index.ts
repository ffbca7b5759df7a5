/**
 * The message edge: Baton's event store and JetStream plumbing, the ledger client, W3C trace
 * context over NATS headers, and the small typed helpers every other library and app uses instead
 * of the client. The `nats` client stays behind these functions and types (ESLint refuses a `nats`
 * import anywhere else but the Nest transport in libs/platform/src/transport), so moving to the
 * modular `@nats-io/*` client touches this library and the transport only. It loads no NestJS,
 * no prom-client and no OpenTelemetry SDK (only `@opentelemetry/api`): the agent SDK is built on it.
 */
export { connectNats, credsFileReader, DEFAULT_NATS_URL, hasNatsCode, headersFrom, lastHeardFrom, natsRefusedCredentials, serverSaid } from './connection';
export { publishUnderOwnId, type OwnIdAck } from './own-id-publish';
export type { NatsConnectOptions, NatsHandle, ServerErrorStatus } from './connection';
export { connectionEvents, onConnectionEvent, serverErrorAbout } from './connection-events';
export type {
  ConnectionDisconnected,
  ConnectionEnded,
  ConnectionEvent,
  ConnectionEventKind,
  ConnectionEventSource,
  ConnectionEventsOptions,
  ConnectionListenerOptions,
  ConnectionReconnected,
  ConnectionReconnecting,
  ConnectionServerError,
  ServerErrorAbout,
} from './connection-events';
export { coalesceWrites, type WriteCoalescing } from './write-coalescing';
export { skipSettledCancelErrors, type SettledRequests } from './settled-requests';
export {
  EventStoreError,
  EventStoreErrorCode,
  ConcurrencyConflict,
  StreamNotFound,
  PublishTimeout,
  PermissionDenied,
  CredentialsRefused,
  type CredentialsProblem,
  ConnectionClosed,
  type ConnectionCloseReason,
  PullEndedError,
  StorageFull,
  storageLimitOf,
  type StorageLimit,
  EventValidationError,
  EventDecodeError,
  ProvisionError,
  TransientError,
  PoisonError,
  mapPublishError,
  isUnavailable,
  isPermissionsViolation,
  isNoResponders,
  isTimeout,
  jsErrCode,
  jsApiError,
  JsErrCode,
} from './errors';
export { JetStreamEventStore } from './store';
export type {
  AggregateRef,
  AppendOptions,
  AppendResult,
  CommandMeta,
  DeciderLike,
  DomainEventLike,
  EventStore,
  EventStoreStats,
  FoldCacheStats,
  ResumedCommand,
  ResumedCommandOutcome,
  FoldLike,
  HandleCommandOptions,
  HandleCommandResult,
  JetStreamEventStoreOptions,
  ReadOptions,
  ReadResult,
  StoredEvent,
  CachedNextEvent,
} from './store';
export {
  Retention,
  Storage,
  Discard,
  DeliverFrom,
  DLQ_DEFAULTS,
  batonTopology,
  batonStreamNames,
  inboxSubjects,
  streamStem,
  watchdogSnapshotStream,
  deploymentStreamNames,
  tokenRevocationStream,
} from './topology';
export type { StreamSpec, ConsumerSpec, TopologySpec, BatonStreamNames, BatonTopologyOptions } from './topology';
export { provision, retireConsumers, streamConfig, consumerConfig, isTransientApiError, PROVISION_RETRY_MS } from './provision';
export type { KeptLimit, ProvisionAction, ProvisionOptions, ProvisionReport, RetireAction, RetiredConsumer } from './provision';
export {
  deadLetter,
  deadLetterMsgId,
  DlqHeader,
  DeadLetterReason,
  REFUSED_LETTER_BYTES,
  dlqSourceToken,
  headersToRecord,
  isCoreRequestStream,
  DEAD_LETTER_ID_FIELDS,
  DEAD_LETTER_LOG_DETAIL_CHARS,
  DEAD_LETTER_REFS_MAX_BYTES,
  deadLetterLogFields,
  deadLetterRefs,
  letterLogFields,
} from './dead-letter';
export type { DeadLetterLogInput, DeadLetterRefs } from './dead-letter';
export { durableNameFor, subjectMatches } from './subject-patterns';
export { DlqSources, LEGACY_DLQ_SOURCES, ROUTER_DLQ_SOURCES, readableDlqSource, sameDlqSource, type DlqSource } from './dlq-sources';
export type { DeadLetterInput, DeadLetterAck } from './dead-letter';
export { runConsumer, classifyError } from './runner';
export type {
  BatchVerdict,
  ConsumedMessage,
  ConsumerLostEvent,
  ConsumerRunner,
  ErrorClass,
  LetterGateOutcome,
  MessageOutcome,
  RunConsumerOptions,
} from './runner';
export { LruCache, type LruWeightBound } from './lru';
export { heapWeight } from './heap-weight';
export * from './dlq-admin';
export { instrumentRunners, type RunnerIdentity, type RunnerInstrumentation } from './runner';
export { streamReader, followStream, readStreamRange, FOLLOW_PULL_BYTES, FOLLOW_PULL_EXPIRES_MS } from './stream-reader';
export { maxPayloadOf } from './pull-size';
export { followHub, type FollowHub, type FollowHubOptions } from './follow-hub';
export type {
  StoredMessage,
  StreamReader,
  StreamReaderOptions,
  StreamClients,
  StreamBounds,
  RangeOptions,
  ReadRangeOptions,
  FollowOptions,
  FollowedMessage,
  StreamFollower,
} from './stream-reader';
export { shareReads, type SeqSource } from './shared-reads';
export { decodeEvent, decodeParsedEvent, headerOf, type DecodedEvent, type HeaderOf } from './decode';
export { headerRecord } from './pull';
export { eventHeaders, schemaFingerprint, SCHEMA_HEADER } from './schema-fingerprint';
export { reactor, reactorEdge } from './reactor';
export type {
  Reactor,
  ReactorDefinition,
  ReactorHandler,
  ReactorHandlers,
  ReactorEvent,
  ReactorStates,
  ReactorContext,
  ReactorDeadLetter,
  ReactorEdge,
  ReactorEdgeOptions,
  DeliveredMessage,
} from './reactor';
export { createNkeyPair, credsFile, nkeyPairFromSeed, decodeJwtClaims, jwtOfCreds, jwtSignedBy, isUserPublicKey, userJwt } from './auth/jwt';
export type { NkeyPair, UserPermissions, SubjectPermission, UserRevocations } from './auth/jwt';
export { permissionsFor, redriveMarkerSubjects } from './auth/permissions';
export { AGENT_HEADER_ALLOWANCE_BYTES, AGENT_USER_LIMITS, userLimitsFor, type UserLimits } from './auth/limits';
export {
  openDeployment,
  issueCreds,
  ensureServiceCreds,
  credsPath,
  credsName,
  principalOfCreds,
  credsGrantResponses,
  authConfig,
  serverConfig,
  writeServerConfig,
  readServerConfigSettings,
  writeTrust,
  describeCreds,
  DeploymentError,
  readAccountLimits,
  writeAccountLimits,
} from './auth/deployment';
export type { AccountLimits, AuthDeployment, IssuedCreds, ServerConfigOptions, WrittenTrust } from './auth/deployment';
export { deploymentDir, readLocalDeployment, stoppedDeployment, type LocalDeployment, type StoppedDeployment } from './auth/local-deployment';
export { readUserRecord } from './auth/user-record';
export type { RecordedUser } from './auth/user-record';
export { revokeUsers, usersOfPrincipal } from './auth/revoke';
export type { Revocation, RevokedUser } from './auth/revoke';
export {
  snapshotStream,
  restoreStream,
  realignRestoredConsumers,
  acknowledgedThrough,
  type RealignedConsumer,
  StreamSnapshotError,
  StreamSnapshotErrorCode,
  type StreamSnapshotInfo,
  type SnapshotStreamOptions,
  type RestoreStreamOptions,
} from './snapshot';
export { LedgerClient } from './ledger-client';
export type {
  LedgerCallOptions,
  LedgerClientOptions,
  LedgerAbandonInput,
  LedgerArchiveInput,
  LedgerClaimInput,
  LedgerCompleteFromResultInput,
  LedgerCompleteThenCreateInput,
  LedgerCreateInput,
  LedgerDecideHandbackInput,
  LedgerFailInput,
  LedgerHeartbeatInput,
  LedgerOpenOffersInput,
  LedgerOperator,
  LedgerReleaseInput,
  LedgerRequeueExpiredInput,
  LedgerReturnInput,
} from './ledger-client';
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
  ambientTracing,
  hopTrace,
  hopTraceHeaders,
  continueTrace,
} from './trace-context';
export type { HeaderRecord, HopTrace, InstallTracingOptions } from './trace-context';
export { instrumentNats } from './instrument-nats';
export type { InstrumentNatsOptions, JetStreamPublished } from './instrument-nats';
export {
  newUniqueId,
  subscribeCore,
  UnreadableHeadersError,
  watchEvents,
  openKvBucket,
  isKvRevisionConflict,
  orderedConsumerOptions,
  consumerInfos,
} from './edge';
export type {
  NatsJetStream,
  NatsJetStreamManager,
  NatsHeaders,
  CoreMessage,
  CoreSubscription,
  CoreSubscribeOptions,
  WatchedEvent,
  KvBucket,
  KvBucketOptions,
  KvEntry,
  OrderedStart,
} from './edge';
export { restampWatchdogSnapshot, SnapshotHeadSchema, watchdogSnapshotHeadSubject, type SnapshotHead, type SnapshotRestamp } from './watchdog-snapshot-head';
