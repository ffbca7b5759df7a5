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
  LedgerReleaseInput,
  LedgerRequeueExpiredInput,
  LedgerReturnInput,
} from './ledger-client';
export {
  LedgerActorSchema,
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
export type { LedgerActor, LedgerError, LedgerReply } from './ledger-protocol';
