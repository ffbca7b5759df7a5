import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { GovernanceErrorCode, LedgerAccessErrorCode, type HandoffRecord } from '@baton/contracts';
import { ProjectControlErrorCode, ResultClaimCode, RunErrorCode } from '@baton/domain';
import * as sdk from './index';
import {
  BatonSdkError,
  BatonSdkErrorCodes,
  ClaimLostError,
  ConnectionClosed,
  CrossProjectResultError,
  DelegatedResultError,
  DuplicateMessageError,
  EdgeRefusalReasons,
  EdgeRefusedError,
  EdgeUnavailableError,
  EventStoreErrorCode,
  HandbackResultError,
  HandoffErrorCode,
  InvalidInputError,
  LedgerCommandError,
  LedgerErrorCode,
  MeshBuildError,
  MessageIdReusedError,
  NoRunResultError,
  NotClaimedError,
  OfferPullError,
  OfferTerminatedError,
  OfferUnsettledError,
  PermissionDenied,
  PublishTimeout,
  RejectionCode,
  SdkErrorCode,
  SubscriptionStoppingError,
  type BatonSdkErrorCode,
  type EdgeRefusalReason,
  type InvalidInputCode,
  type LedgerReplyCode,
} from './index';

/*
 * Every error's `code` is a string-literal union the compiler checks (a client switches on it with
 * the compiler's help), and every code the SDK can throw is in that union at run time too.
 *
 * The type checks below are statements of this file: `npx tsc -p tsconfig.json --noEmit` checks
 * them, and so does the last test, which compiles this file with the TypeScript compiler — a
 * `// @ts-expect-error` an impossible code no longer trips (a code typed `string` again) fails it.
 */

/** True when A and B are the same type (not merely assignable one way). */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

// Each class names the codes it carries, no more (and no wider `string`).
const exact: [
  Equal<BatonSdkError['code'], BatonSdkErrorCode>,
  Equal<NotClaimedError['code'], 'not_claimed'>,
  Equal<ClaimLostError['code'], 'claim_lost'>,
  Equal<OfferPullError['code'], 'offer_pull_failed'>,
  Equal<OfferTerminatedError['code'], 'offer_terminated'>,
  Equal<OfferUnsettledError['code'], 'offer_unsettled'>,
  Equal<MeshBuildError['code'], 'mesh_invalid'>,
  Equal<EdgeRefusedError['code'], EdgeRefusalReason>,
  Equal<InvalidInputError['code'], InvalidInputCode>,
  Equal<LedgerCommandError['code'], LedgerReplyCode>,
  Equal<ConnectionClosed['code'], 'connection_closed'>,
  Equal<PublishTimeout['code'], 'publish_timeout'>,
  // The run-time set holds exactly the union.
  Equal<typeof BatonSdkErrorCodes extends ReadonlySet<infer C> ? C : never, BatonSdkErrorCode>,
] = [true, true, true, true, true, true, true, true, true, true, true, true, true];

/** Codes the compiler refuses where they cannot occur. Never called: it only has to compile. */
function impossibleCodes(notClaimed: NotClaimedError, ledger: LedgerCommandError, input: InvalidInputError, denied: PermissionDenied): void {
  // @ts-expect-error a NotClaimedError is never offer_terminated
  if (notClaimed.code === 'offer_terminated') return;
  // @ts-expect-error no ledger reply says not_claimer (the ledger's code is not_the_claimer)
  if (ledger.code === 'not_claimer') return;
  // @ts-expect-error an invalid input is refused before anything is sent: never a ledger's handoff_not_pending
  if (input.code === 'handoff_not_pending') return;
  // @ts-expect-error PermissionDenied is permission_denied only
  if (denied.code === 'store_error') return;
  // @ts-expect-error no error of the SDK carries this code
  const unknown: BatonSdkErrorCode = 'no_such_code';
  void unknown;
}
void impossibleCodes;

/** A switch over the SDK's own codes that the compiler proves exhaustive (a new code breaks it until handled). */
function whatToDo(code: sdk.SdkErrorCode): 'fix' | 'retry' | 'nothing' | 'report' {
  switch (code) {
    case SdkErrorCode.notClaimed:
    case SdkErrorCode.crossProjectResult:
    case SdkErrorCode.delegatedHandoff:
    case SdkErrorCode.handoffHasNoRun:
    case SdkErrorCode.completionHandback:
    case SdkErrorCode.messageIdReused:
    case SdkErrorCode.meshInvalid:
    case SdkErrorCode.offerTerminated:
    case SdkErrorCode.offerUnsettled:
    case SdkErrorCode.selfCall:
      return 'fix';
    case SdkErrorCode.edgeUnavailable:
    case SdkErrorCode.offerPullFailed:
      return 'retry';
    case SdkErrorCode.duplicateMessageId:
    case SdkErrorCode.subscriptionStopping:
    case SdkErrorCode.claimLost:
      return 'nothing';
    case SdkErrorCode.sdkError:
      return 'report';
    default: {
      const unhandled: never = code;
      return unhandled;
    }
  }
}

/** Every value of each const object. */
const valuesOf = (...objects: object[]): string[] => objects.flatMap((o) => Object.values(o).map(String));

const handoff = { id: 'h-1', status: 'pending', retry: { retry_count: 1, max_retries: 3 } } as unknown as HandoffRecord;

/** One of each error class the SDK exports, made as the SDK makes it. */
const oneOfEach: BatonSdkError[] = [
  new BatonSdkError('plain'),
  new InvalidInputError('agent result', { code: RejectionCode.schemaViolation, message: 'body: too long', issues: [{ path: 'body', message: 'too long' }] }),
  new LedgerCommandError('claim', 'h-1', { code: HandoffErrorCode.handoffNotPending, kind: 'wrong_state', message: 'claimed' }),
  new NotClaimedError('h-1', 'heartbeat'),
  new ClaimLostError(
    'h-1',
    new LedgerCommandError('heartbeat', 'h-1', {
      code: HandoffErrorCode.handoffNotClaimed,
      kind: 'wrong_state',
      message: 'failed',
      details: { status: 'failed', ended: 'deadline_passed' },
    }),
  ),
  new CrossProjectResultError('h-1', 'shop', 'billing', 'wr-1'),
  new DelegatedResultError('h-1', 'wr-1'),
  new NoRunResultError('h-1'),
  new HandbackResultError('h-1'),
  new DuplicateMessageError('result:shop:wr-1/r-1', 'baton.in.shop.result.coder', 'BATON_INBOX', 7),
  new MessageIdReusedError('result:shop:wr-1/r-1', 'baton.in.shop.result.coder'),
  new EdgeRefusedError('baton.edge.shop.result.coder', { reason: 'msg_id_mismatch', detail: 'another project' }),
  new EdgeUnavailableError('baton.edge.shop.result.coder', 3, 15_000),
  new OfferTerminatedError('baton.in.shop.offer.coder', 9, 5, { handoffId: 'h-1', giveUp: { recorded: true, handoff } }),
  new OfferUnsettledError('h-1', 9, 1),
  new SubscriptionStoppingError(20_000),
  new OfferPullError('offers-1-shop-coder', { cause: new Error('503'), reason: 'unavailable', natsCode: '503' }),
  new MeshBuildError([{ code: 'MESH_SELF_HANDOFF', path: ['handoffs', 'triage'], message: 'triage hands off to itself' }]),
];

describe('SDK error codes', () => {
  it('the codes of every source an SDK error takes its code from are in BatonSdkErrorCodes: its own, the rejections, the ledger’s, the edge’s, the checks’', () => {
    const sources = [
      ...valuesOf(SdkErrorCode, RejectionCode, HandoffErrorCode, LedgerErrorCode, LedgerAccessErrorCode, GovernanceErrorCode, ProjectControlErrorCode),
      ...EdgeRefusalReasons,
      RunErrorCode.noNoticeRecipient,
      ResultClaimCode.claimRequired,
    ];
    expect(sources.filter((code) => !BatonSdkErrorCodes.has(code as BatonSdkErrorCode))).toEqual([]);
    // And nothing else: every code in the set comes from one of them.
    expect([...BatonSdkErrorCodes].filter((code) => !sources.includes(code))).toEqual([]);
  });

  it('one of each exported error class carries a code in BatonSdkErrorCodes, and every class the SDK exports is among them', () => {
    const exported = Object.values(sdk).filter(
      (value): value is typeof BatonSdkError => typeof value === 'function' && (value === BatonSdkError || value.prototype instanceof BatonSdkError),
    );
    expect(exported.filter((cls) => !oneOfEach.some((error) => error.constructor === cls)).map((cls) => cls.name)).toEqual([]);
    expect(oneOfEach.filter((error) => !BatonSdkErrorCodes.has(error.code)).map((error) => `${error.name}: ${error.code}`)).toEqual([]);
    expect(oneOfEach.map((error) => error.code)).toEqual(
      expect.arrayContaining(['sdk_error', 'schema_violation', 'handoff_not_pending', 'not_claimed', 'msg_id_mismatch', 'offer_pull_failed', 'mesh_invalid']),
    );
  });

  it('every code literal in the SDK’s sources and every SdkErrorCode they name is in BatonSdkErrorCodes', () => {
    const dir = __dirname;
    const files = readdirSync(dir).filter((name) => name.endsWith('.ts') && !/\.(spec|int-spec)\.ts$|int-support\.ts$/.test(name));
    const text = files.map((name) => readFileSync(join(dir, name), 'utf8')).join('\n');
    const literals = [...text.matchAll(/\bcode:\s*'([a-z][a-z0-9_]*)'/g)].map((m) => m[1]!).filter((code) => code !== 'custom');
    const named = [...text.matchAll(/\bSdkErrorCode\.([a-zA-Z]+)/g)].map(
      (m) => (SdkErrorCode as Record<string, string | undefined>)[m[1]!] ?? `SdkErrorCode.${m[1]}`,
    );
    expect(named.length).toBeGreaterThan(10);
    expect([...literals, ...named].filter((code) => !BatonSdkErrorCodes.has(code as BatonSdkErrorCode))).toEqual([]);
  });

  it('an invalid input carries its check’s own code when the SDK knows it, else its rejection’s', () => {
    const own = new InvalidInputError('run start', {
      code: RejectionCode.schemaViolation,
      message: 'started_by: nobody to notify',
      issues: [{ path: 'started_by', message: 'nobody to notify', code: RunErrorCode.noNoticeRecipient }],
    });
    expect(own.code).toBe('no_notice_recipient');
    const unknown = new InvalidInputError('run start', {
      code: RejectionCode.schemaViolation,
      message: 'x: a newer check',
      issues: [{ path: 'x', message: 'a newer check', code: 'some_newer_check' }],
    });
    expect(unknown.code).toBe('schema_violation');
  });

  it('an exhaustive switch over SdkErrorCode handles each of them', () => {
    expect(Object.values(SdkErrorCode).map((code) => [code, whatToDo(code)])).toEqual(
      Object.values(SdkErrorCode).map((code) => [code, expect.stringMatching(/^(fix|retry|nothing|report)$/)]),
    );
    expect(exact.every((check) => check)).toBe(true);
    expect(BatonSdkErrorCodes.has(EventStoreErrorCode.storeError as BatonSdkErrorCode)).toBe(false);
  });

  it('the compiler checks the codes’ types: this file type-checks, each @ts-expect-error above trips on an impossible code', () => {
    const root = join(__dirname, '..', '..', '..');
    // The repository's compiler options (not its file list: only this file is the root).
    const base = ts.readConfigFile(join(root, 'tsconfig.base.json'), ts.sys.readFile);
    const { options, errors } = ts.convertCompilerOptionsFromJson((base.config as { compilerOptions: unknown }).compilerOptions, root);
    expect(errors).toEqual([]);
    const program = ts.createProgram([__filename], { ...options, noEmit: true });
    // This file's diagnostics only: the sources it imports are checked by tsc over the repository.
    const file = program.getSourceFile(__filename);
    if (file === undefined) throw new Error(`${__filename} is not in the program`);
    const diagnostics = [...program.getSyntacticDiagnostics(file), ...program.getSemanticDiagnostics(file)].map(
      (d) => `${d.start !== undefined ? file.getLineAndCharacterOfPosition(d.start).line + 1 : '?'}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`,
    );
    expect(diagnostics).toEqual([]);
  }, 120_000);
});
