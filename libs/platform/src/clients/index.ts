// The ledger's wire protocol lives in @baton/contracts (ledger-protocol.ts) and the LedgerClient in
// the message-edge library @baton/eventstore, so the SDK gets both without this platform. They are
// re-exported here for the services; new code imports them from their own libraries.
export { LedgerClient } from '@baton/eventstore';
export type {
  LedgerCallOptions,
  LedgerClientOptions,
  LedgerAbandonInput,
  LedgerArchiveInput,
  LedgerClaimInput,
  LedgerCompleteFromResultInput,
  LedgerCreateInput,
  LedgerDecideHandbackInput,
  LedgerFailInput,
  LedgerHeartbeatInput,
  LedgerOpenOffersInput,
  LedgerOperator,
  LedgerReleaseInput,
  LedgerRequeueExpiredInput,
  LedgerReturnInput,
} from '@baton/eventstore';
export {
  LedgerCommandNames,
  LedgerErrorCode,
  LedgerErrorKind,
  LedgerErrorKindSchema,
  LedgerErrorSchema,
  LedgerReplySchema,
  OfferHeader,
  RetryableLedgerCodes,
  handoffOfferSubject,
  handoffOffersFor,
  isLedgerCommandName,
} from '@baton/contracts';
export type { LedgerError, LedgerReply } from '@baton/contracts';
