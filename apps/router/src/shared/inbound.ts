import { bodyIdentityRefusal, decodeInbound, leadingCode, type SubjectIdentity } from '@baton/contracts';
import { PoisonError } from '@baton/eventstore';
import type { z } from 'zod';
import { subjectTokens } from './subjects';

/**
 * Like {@link decodeInbound}, for a JetStream handler: a rejection becomes a {@link PoisonError}
 * whose reason is the rejection's leading code (its first issue's own code when the check has one,
 * e.g. `no_notice_recipient` for a start with nobody to notify; else the rejection code), so the
 * transport dead-letters the original bytes with that reason and terms the message (bad input is
 * never retried).
 */
export function decodeOrPoison<S extends z.ZodType>(bytes: Uint8Array, schema: S): z.infer<S> {
  const decoded = decodeInbound(bytes, schema);
  if (!decoded.ok) throw poison({ code: leadingCode(decoded.rejection), message: decoded.rejection.message });
  return decoded.value;
}

/**
 * A PoisonError carrying a refusal: the dead letter's reason is its code (a `RejectionCode`, or a
 * domain error code such as `no_notice_recipient`).
 */
export function poison(rejection: { code: string; message: string }): PoisonError {
  return new PoisonError(`${rejection.code}: ${rejection.message}`, rejection.code);
}

/**
 * Decode an inbox message (`<prefix>.in.<project>.…`) with {@link decodeOrPoison} and check the
 * body against the identity its subject carries — the project, and on an agent's subject the
 * agent: identity comes from the subject, and a body is only checked against it. Another project
 * in the body, or a subject that carries no identity, is poison `project_mismatch`; another agent,
 * `identity_mismatch` (the ledger's codes for the same refusals), so a publisher cannot write
 * into another project's runs or speak for another agent. `identityOf` reads the subject (default
 * {@link subjectTokens}, the run inbox; the mesh inbox has its own).
 */
export function decodeForSubject<S extends z.ZodType<{ project: string; agent?: string }>>(
  prefix: string,
  subject: string,
  bytes: Uint8Array,
  schema: S,
  identityOf: (prefix: string, subject: string) => SubjectIdentity | null = subjectTokens,
): z.infer<S> {
  const value = decodeOrPoison(bytes, schema);
  const refused = bodyIdentityRefusal(identityOf(prefix, subject), value);
  if (refused !== null) throw poison(refused);
  return value;
}
