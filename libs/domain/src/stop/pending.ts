import { PendingToolCall } from '@baton/contracts';
import { fnv1a64, frozenJsonCopy, stableStringify } from './freeze';

/**
 * A deep frozen copy of a pending tool call, or null when none was pending. Never invents a call
 * (undefined and null give null) and never drops a real one. Later mutation of the caller's args
 * does not reach the copy, and the copy itself cannot be mutated.
 */
export function freezePending(pending: PendingToolCall | null | undefined): PendingToolCall | null {
  if (pending === null || pending === undefined) return null;
  const call: { name: string; args: Record<string, unknown>; call_id?: string } = {
    name: pending.name,
    args: (frozenJsonCopy(pending.args ?? {}) ?? Object.freeze({})) as Record<string, unknown>,
  };
  if (pending.call_id !== undefined) call.call_id = pending.call_id;
  return Object.freeze(call);
}

/**
 * A deterministic digest of a pending tool call (`fnv1a64:` + 16 hex digits): FNV-1a 64 over the
 * key-sorted JSON of `{ name, args, call_id }`. Key order and copying do not change it; any change
 * of name, args or call_id does. `null`/`undefined` (nothing pending) has its own digest, but a
 * packet stores `pending_digest: null` then. Pure JS; no node crypto.
 */
export function pendingDigest(pending: PendingToolCall | null | undefined): string {
  const subject = pending === null || pending === undefined ? null : { name: pending.name, args: pending.args ?? {}, call_id: pending.call_id };
  return `fnv1a64:${fnv1a64(stableStringify(subject))}`;
}
