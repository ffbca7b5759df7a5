export { LedgerClient } from './ledger-client';
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
} from './ledger-client';
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
} from './ledger-protocol';
export type { LedgerError, LedgerReply } from './ledger-protocol';
