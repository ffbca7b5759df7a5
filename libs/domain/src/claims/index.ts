export { checkResultClaim, handoffClaimFold, handoffClaimView, recordsSameClaim, ResultClaimCode } from './result-claim';
export type { ClaimedRecord, ClaimedResult, HandoffClaimView, ResultClaimRefusal } from './result-claim';
