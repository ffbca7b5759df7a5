export {
  runDecider,
  decideRun,
  decisionSignalOf,
  declaredVariables,
  readTypedDecision,
  RunErrorCode,
  OwnTurnRefusalCodes,
  beginsWithRecordOf,
  isPassiveRunEvent,
} from './decide';
export {
  answerKey,
  evolveRun,
  hasProcessedId,
  initialRunState,
  messageKey,
  refusedKindOf,
  foreignRefusalsOf,
  idleRefusalsOf,
  waitsForNoResult,
  openStopId,
  isFinished,
  activeScope,
  parentScope,
  MAX_TRANSCRIPT,
  MAX_QUEUED_MESSAGES,
} from './state';
export { ProcessedIds } from './processed-ids';
export type {
  RunEvent,
  RunEventOf,
  RunState,
  StartedRunState,
  RunCore,
  RunHold,
  WaitingParent,
  QueuedMessage,
  PendingHandoff as PendingRunHandoff,
} from './state';
export type {
  RunCommand,
  RunCommandMetadata,
  StartRun,
  RecordResult,
  ResumeRun,
  StopRun,
  RejectResult,
  SessionMessageCommand,
  HandoffFailedCommand,
} from './commands';
export { HandoffFailureReason } from './commands';
export { deriveId, deriveScopedId, handoffIdFor, noticeIdFor, stopIdFor } from './ids';
export { CUSTOMER, isConversational, isConversationalAgent, isAuthenticatedFor, HandoffRefusalCode } from './conversation';
export { attributeEngineDecisions, ENGINE } from './attribution';
