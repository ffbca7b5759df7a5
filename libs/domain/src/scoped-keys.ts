/**
 * Idempotency keys scoped by who used them. An aggregate remembers each recent key with the
 * command and the actor that stored it (read from its events), and a command counts as a retry
 * only when the same command from the same actor brought that key: nobody spends another caller's
 * key. Where the event also recorded the digest of the caller's body, the retry must carry the same
 * body: the same key with another body is a reuse, refused rather than answered as the first.
 * One mechanism for every aggregate that remembers keys (handoffs, project control).
 */

/**
 * One remembered key. `actor` / `actor_kind` are undefined when the event does not tell them:
 * then the command is one only one principal may send, and any caller of it matches. `digest` is
 * undefined for the services' own commands and for events stored before digests were recorded:
 * then any body matches.
 */
export interface ScopedKey<C extends string, K extends string = string> {
  key: string;
  command: C;
  actor: string | undefined;
  actor_kind: K | undefined;
  digest?: string;
}

/** `keys` with `entry` appended (oldest first), unless the same scoped key is already there; at most `limit` kept. */
export function rememberScopedKey<C extends string, K extends string>(
  keys: readonly ScopedKey<C, K>[],
  entry: ScopedKey<C, K>,
  limit: number,
): readonly ScopedKey<C, K>[] {
  if (keys.some((k) => k.key === entry.key && k.command === entry.command && k.actor === entry.actor && k.actor_kind === entry.actor_kind)) return keys;
  const next = [...keys, entry];
  return next.length > limit ? next.slice(next.length - limit) : next;
}

/**
 * What a command's key is to an aggregate: `new` (not among its recent keys for this command and
 * actor: decide it), `retry` (the same command, actor and body: answer it with no events), or
 * `reused` (the same command and actor with another body: refuse it).
 */
export type KeyUse = { use: 'new' } | { use: 'retry' } | { use: 'reused'; recorded: string };

/**
 * How a command of type `command` from `actor` (of kind `actorKind`) with `key` and body `digest`
 * meets `keys`. Bodies are compared only when both the remembered key and the command have a digest.
 */
export function scopedKeyUse<C extends string, K extends string>(
  keys: readonly ScopedKey<C, K>[],
  key: string,
  command: C,
  actor: string,
  actorKind: K | undefined,
  digest: string | undefined,
): KeyUse {
  const found = keys.find(
    (k) => k.key === key && k.command === command && (k.actor === undefined || k.actor === actor) && (k.actor_kind === undefined || k.actor_kind === actorKind),
  );
  if (found === undefined) return { use: 'new' };
  if (found.digest === undefined || digest === undefined || found.digest === digest) return { use: 'retry' };
  return { use: 'reused', recorded: found.digest };
}

/** Is a command of type `command` from `actor` (of kind `actorKind`) with `key` (and body `digest`) a retry of one in `keys`? */
export function isScopedRetry<C extends string, K extends string>(
  keys: readonly ScopedKey<C, K>[],
  key: string,
  command: C,
  actor: string,
  actorKind: K | undefined,
  digest?: string,
): boolean {
  return scopedKeyUse(keys, key, command, actor, actorKind, digest).use === 'retry';
}
