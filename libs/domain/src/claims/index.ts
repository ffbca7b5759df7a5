export { checkResultClaim, handoffClaimFold, handoffClaimView, ResultClaimCode } from './result-claim';
export type { ClaimedResult, HandoffClaimView, ResultClaimRefusal } from './result-claim';
