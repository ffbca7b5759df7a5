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
  StreamNotFound,
  type ConnectionCloseReason,
  type CredentialsProblem,
} from '@baton/eventstore';
export type { EdgeRefusalReason, LedgerReply } from '@baton/contracts';
export { EdgeRefusalReasons } from '@baton/contracts';
export { decisions } from './decisions';
export { AgentSubjects, offerDurableName } from './subjects';
export {
  BatonSdkError,
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
  SubscriptionStoppingError,
} from './errors';
export { DEFAULT_PUBLISH_RETRY, DEFAULT_SENT_IDS, MAX_PUBLISH_RETRY_SPAN_MS, SentMessageIds, type PublishRetry } from './sent-ids';
export type { LedgerErrorBody, OfferGiveUp, OfferPullFailure } from './errors';
/** The AGENT_RUN_CONFIG sentinel, for legacy agents that write their decision into a comment body. */
export { renderSentinel, appendSentinelOnce, parseSentinel, SentinelError } from '@baton/contracts';
export type { AgentResult, AgentRunConfig, HandoffRecord, SentinelParse, StartRunRequest } from '@baton/contracts';
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
