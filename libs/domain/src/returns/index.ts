export {
  buildHandoffContext,
  computeReturnEffects,
  effectiveParentReturn,
  latestCustomerMessage,
  parentReturnVerdict,
  pickResumeMessage,
  writableBy,
} from './returns';
export type { ParentReturnPolicy, ResumeSources, ReturnEffects } from './returns';
