// Stop packets (seed 003): build the three documents of a handoff stop, decide what an operator's
// answer does, and where a packet may go. The wire shapes live in @baton/contracts (stop-packet.ts);
// the main ones are re-exported here so callers can import the whole feature from one place.
export type { NextForm, OperatorAnswer, ResumeEffect, StopPacket } from '@baton/contracts';
export { NextFormSchema, OperatorAnswerSchema, ResumeEffectSchema, StopPacketSchema, StopWhy, StopWhySchema } from '@baton/contracts';
export { buildStop, StopUserMessages } from './build-stop';
export type { StopDestinationRequest, StopDocuments, StopFacts, TriedEntry } from './build-stop';
export {
  acknowledgeForm,
  approveDenyForm,
  callSummary,
  capAtMost,
  capFloor,
  clip,
  handbackForm,
  HOP_CAP_MAX,
  HopCapName,
  raiseCapForm,
  StopWhyLabel,
  typeIntentForm,
} from './forms';
export { freezePending, pendingDigest } from './pending';
export { frozenJsonCopy, stableStringify } from './freeze';
export { allowedActions, decideResume, goalDone, markAnswered, ResumeErrorCode } from './resume';
export type { ResumeActorRole, ResumeContext, ResumeDecision } from './resume';
export { DestinationRefusal, stopDestination } from './destination';
export type { StopDestination, StopDestinationDecision } from './destination';
