/**
 * @baton/sdk — the typed client agent microservices use to talk to Baton: publish results,
 * start runs, take the handoffs offered to them (claim, heartbeat, return, release, fail,
 * finish), and build routing decisions. See libs/sdk/README.md.
 */
export { connectNats, createBatonClient, DEFAULT_STOP_TIMEOUT_MS } from './client';
export type {
  AgentResultInput,
  BatonAgent,
  BatonClientOptions,
  HandoffsOptions,
  OfferSubscription,
  PublishReceipt,
  ResultRefusal,
  ResultRefusalCode,
  SessionMessageInput,
  StartRunInput,
  StopOptions,
  StopOutcome,
} from './client';
export type { ClaimOptions, FinishResult, HandoffOffer, ReturnReport, UnfinishedOffer } from './offers';
export { LedgerClient } from '@baton/eventstore';
// One connection shared by several clients (`createBatonClient({ nats })`: `connectNats` above, which
// connects as the agent its credentials name), and the ledger's create body.
export type { LedgerCreateInput, NatsConnectOptions, NatsHandle } from '@baton/eventstore';
// What happens to a client's connection (`agent.connectionEvents()`, `onConnection`).
export type {
  ConnectionDisconnected,
  ConnectionEnded,
  ConnectionEvent,
  ConnectionEventKind,
  ConnectionEventsOptions,
  ConnectionReconnected,
  ConnectionReconnecting,
  ConnectionServerError,
  ServerErrorAbout,
} from '@baton/eventstore';
// The contracts a client validates against and names its messages by (docs/schemas), and the
// stable codes of refusals: the ledger's own, the handoff decider's, a rejected message's.
export {
  AgentResultSchema,
  LedgerErrorCode,
  MeshStartRequestSchema,
  MsgIds,
  parseSubject,
  RejectionCode,
  SessionMessageSchema,
  StartRunRequestSchema,
  SubjectTable,
} from '@baton/contracts';
export type { MeshDefinition, MeshStartRequest, Rejection, SessionMessage } from '@baton/contracts';
export { HandoffErrorCode } from '@baton/domain';
// What a publish may throw besides the SDK's own errors (each with a stable `code`).
export {
  ConnectionClosed,
  CredentialsRefused,
  EventStoreError,
  EventStoreErrorCode,
  PermissionDenied,
  PublishTimeout,
  StorageFull,
  StreamNotFound,
  type ConnectionCloseReason,
  type CredentialsProblem,
  type StorageLimit,
} from '@baton/eventstore';
export type { EdgeRefusalReason, HandoffEnding, LedgerReply, ResultRefused } from '@baton/contracts';
// How a handoff ended, as a ledger refusal names it (`details.ended`); what a refused-result notice carries.
export { EdgeRefusalReasons, HandoffEndings, ResultRefusedSchema, resultRefusedSubject } from '@baton/contracts';
export { decisions } from './decisions';
export { AgentSubjects, offerDurableName } from './subjects';
// Every error's `code` is typed: SdkErrorCode (the SDK's own codes), the codes of an invalid input
// and of a ledger refusal, and BatonSdkErrorCode, every code a BatonSdkError carries.
export {
  BatonSdkError,
  BatonSdkErrorCodes,
  SdkErrorCode,
  type BatonSdkErrorCode,
  type InvalidInputCode,
  type LedgerReplyCode,
  ClaimLostEnded,
  ClaimLostError,
  ClaimLostOpen,
  claimLostBy,
  type ClaimLostBy,
  CrossProjectResultError,
  DelegatedResultError,
  NoRunResultError,
  HandbackResultError,
  DuplicateMessageError,
  EdgeRefusedError,
  EdgeUnavailableError,
  MessageIdReusedError,
  InvalidInputError,
  LedgerCommandError,
  NotClaimedError,
  OfferPullError,
  OfferTerminatedError,
  OfferUnsettledError,
  SubscriptionStoppingError,
} from './errors';
export { DEFAULT_PUBLISH_RETRY, DEFAULT_SENT_IDS, MAX_PUBLISH_RETRY_SPAN_MS, SentMessageIds, type PublishRetry } from './sent-ids';
export type { LedgerErrorBody, OfferEnding, OfferGiveUp, OfferPullFailure } from './errors';
/** The AGENT_RUN_CONFIG sentinel, for legacy agents that write their decision into a comment body. */
export { renderSentinel, appendSentinelOnce, parseSentinel, SentinelError } from '@baton/contracts';
export type { AgentResult, AgentRunConfig, HandoffRecord, ReturnedAnswer, SentinelParse, StartRunRequest } from '@baton/contracts';
export {
  anthropicHandoffTools,
  handoffCallsFromAnthropic,
  handoffCallsFromOpenAi,
  isHandoffToolName,
  MeshBuildError,
  meshHandoffTools,
  meshTurnResult,
  openAiHandoffTools,
  publishMeshResult,
  startMesh,
} from './mesh';
export type { AnthropicTool, HandoffToolParameters, MeshHandoffTool, MeshPublisher, MeshToolOptions, MeshTurnInput, OpenAiFunctionTool } from './mesh';
export * from './webhook';
