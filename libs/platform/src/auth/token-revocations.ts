import { z } from 'zod';
import { IsoTimeSchema } from '@baton/contracts';
import {
  isPermissionsViolation,
  PermissionDenied,
  provision,
  Retention,
  Storage,
  StreamNotFound,
  onConnectionEvent,
  streamReader,
  tokenRevocationStream,
  type FollowedMessage,
  type NatsHandle,
  type StreamFollower,
  type StreamReader,
  type StreamSpec,
} from '@baton/eventstore';
import { API_TOKEN_ID_PATTERN } from './api-token';
import { tokenRevocationMac, tokenRevocationMacValid, TOKEN_MAC_PATTERN, type TokenKey } from './token-key';

/*
 * The deployment's token revocation log: where a revocation lives so that whoever can write Redis
 * cannot take it back.
 *
 * A token record in Redis is signed with the token key (token-key.ts), so a Redis writer cannot
 * forge or alter one; but they can put back an EARLIER signed record of a token — one captured
 * before it was revoked — and a MAC alone cannot tell an old record from the current one. So every
 * revocation is also appended here: a JetStream stream (`<PREFIX>_TOKEN_REVOCATIONS` on
 * `<prefix>.auth.revoked.<token_id>`, delete and purge denied: entries are never removed), each
 * entry signed with the token key. A notifier that holds the key refuses a token this log says is
 * revoked, whatever Redis holds (`ApiTokenStore.valid`), and refuses every token while it cannot
 * read the log (503 `revocations_unavailable`: fail closed, an outage, not bad credentials). Redis
 * can be flushed, restored from a backup or rolled back record by record: a revoked token stays revoked.
 *
 * How the notifier reads it ({@link TokenRevocationLog.follow}): a follower (the event store's
 * `streamReader(…).follow`, an ordered, ack-less consumer of its own) keeps every verified
 * revocation in memory, and a probe every {@link REVOCATION_PROBE_MS} (one `STREAM.INFO`) checks
 * that it has handed over everything the stream holds. While the last such confirmation is at most
 * {@link REVOCATION_FRESH_MS} old and the connection is up, an authentication is answered from
 * memory with no NATS round trip; otherwise (starting, reconnecting, behind, the stream re-made)
 * each lookup is a direct get on the token's subject as before, and only when that fails is the
 * token refused `revocations_unavailable`. The guarantee: a revocation stored at time t is honoured
 * by every authentication that starts after t + {@link REVOCATION_FRESH_MS} (3 s), and in practice
 * as soon as the follower delivers it (milliseconds). The normal revocation (`baton token revoke`)
 * also marks the Redis record revoked, which every authentication reads: it is instant; the log
 * is what stops a rolled-back record. Memory: at most {@link MAX_REMEMBERED_REVOCATIONS} revoked
 * token ids (about 200 bytes each, some 20 MB at the cap; a deployment revokes a few tokens a
 * month); past it the follower's set is no longer complete and every lookup is a direct get again.
 *
 * Who can write it: only the admin's NATS credentials publish on `<prefix>.auth.>` (`baton
 * nats-config`, libs/eventstore/src/auth/permissions.ts); the notifier may make the stream and
 * read it, nothing else. Anything else that lands on its subjects (a JetStream API answer a service
 * aimed there) carries no valid MAC and is ignored. A token's role, projects and expiry never
 * change after it is made (the record's MAC covers them): narrowing a token is making a new one
 * and revoking the old (`baton token create --rotate`), so this log covers that too.
 *
 * What it does not cover: deleting the stream itself (the admin's right alone), or losing the
 * JetStream storage, forgets the revocations — the notifier makes an empty log again at its next
 * start. Back the stream up with the event stream.
 */

/** The stream that holds a deployment's token revocations (named in the event store's topology). */
export function tokenRevocationStreamName(prefix: string): string {
  return tokenRevocationStream(prefix).name;
}

/** The subject a token's revocation is appended on. */
export function tokenRevocationSubject(prefix: string, tokenId: string): string {
  return `${prefix}.auth.revoked.${tokenId}`;
}

/** Every subject of the log (what only the admin may publish). */
export function tokenRevocationSubjects(prefix: string): string[] {
  return tokenRevocationStream(prefix).subjects;
}

/** The log's stream, declared as code: kept forever, no message removed (delete and purge denied). */
export function tokenRevocationStreamSpec(prefix: string, options: { replicas?: number } = {}): StreamSpec {
  return {
    name: tokenRevocationStreamName(prefix),
    subjects: tokenRevocationSubjects(prefix),
    description: 'Baton operator API token revocations, signed with the token key (append-only)',
    retention: Retention.limits,
    storage: Storage.file,
    replicas: options.replicas ?? 1,
    duplicateWindowMs: 2 * 60 * 1000,
    denyDelete: true,
    denyPurge: true,
    maxMsgSize: 1024,
  };
}

/** One entry of the log. */
export const TokenRevocationEntrySchema = z.strictObject({
  token_id: z.string().regex(API_TOKEN_ID_PATTERN),
  revoked_at: IsoTimeSchema,
  /** HMAC-SHA256 of the other fields under the token key ({@link tokenRevocationMac}). */
  mac: z.string().regex(TOKEN_MAC_PATTERN),
});
export type TokenRevocationEntry = z.infer<typeof TokenRevocationEntrySchema>;

/**
 * The log could not be read or written: NATS unreachable or too slow, the stream missing, or
 * credentials that may not use it. The notifier refuses every token meanwhile (503
 * `revocations_unavailable` with `Retry-After`); `baton token revoke` writes nothing (exit 1, `token_revocation_unrecorded`).
 */
export class TokenRevocationLogError extends Error {
  override name = 'TokenRevocationLogError';
  constructor(
    readonly reason: 'stream_missing' | 'permission_denied' | 'unavailable' | 'too_many_unsigned',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Entries on one token's subject that do not verify, read before giving up (fail closed). */
const MAX_UNVERIFIED_PER_TOKEN = 32;

/** What {@link TokenRevocationLog.record} did: appended the entry, or found one already. */
export type RevocationRecorded = { appended: boolean; revoked_at: string };

/** How often a following log checks that its follower holds everything the stream does (one `STREAM.INFO`), ms. */
export const REVOCATION_PROBE_MS = 1000;
/** How long one such confirmation lets lookups be answered from memory, ms (the bound of the guarantee). */
export const REVOCATION_FRESH_MS = 3000;
/** How long a follower that could not start waits before trying again, ms. */
export const REVOCATION_FOLLOW_RETRY_MS = 5000;
/** Most revoked token ids a log keeps in memory (about 200 bytes each); past it lookups are direct gets. */
export const MAX_REMEMBERED_REVOCATIONS = 100_000;

/** How a following log answers lookups now ({@link TokenRevocationLog.followState}). */
export interface RevocationFollowState {
  /** {@link TokenRevocationLog.follow} was called and not stopped. */
  following: boolean;
  /** Lookups are answered from memory now (caught up, confirmed within {@link REVOCATION_FRESH_MS}). */
  live: boolean;
  /** Revoked token ids held in memory. */
  remembered: number;
  /** False once {@link MAX_REMEMBERED_REVOCATIONS} was reached: the memory is not the whole log. */
  complete: boolean;
  /** Stream sequence of the last entry the follower handed over. */
  lastSeq: number;
}

/** What a following log tells its owner (logs): the follower could not start, memory full, live again. */
export type RevocationFollowEvent =
  | { kind: 'follow_failed'; error: TokenRevocationLogError }
  | { kind: 'memory_full'; limit: number }
  | { kind: 'restarted'; why: string };

/**
 * The revocation log of the deployment under `prefix`, read and written with the token key.
 * Revocations it has seen are remembered (a revocation is final). Without {@link follow}, every
 * other lookup asks the stream (a direct get), so a revocation made by another process counts at
 * once; with it, lookups are answered from memory while the follower is confirmed caught up (see
 * the module comment for the exact guarantee).
 */
export class TokenRevocationLog {
  private readonly reader: StreamReader;
  private readonly known = new Map<string, string>();
  private readonly stream: string;
  private following = false;
  private follower: StreamFollower | null = null;
  /** The stream's creation time when the follower started (a re-made stream restarts it from its start). */
  private streamCreated: string | null = null;
  /** When the last probe that found the follower caught up was sent (ms since the epoch; 0: never, or void since). */
  private confirmedAt = 0;
  private connected = true;
  private complete = true;
  private probeTimer: NodeJS.Timeout | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private stopEvents: (() => void) | null = null;
  private onFollowEvent: (event: RevocationFollowEvent) => void = () => undefined;

  constructor(
    private readonly nats: Pick<NatsHandle, 'js' | 'jsm'>,
    readonly prefix: string,
    private readonly key: TokenKey,
    private readonly options: { replicas?: number } = {},
  ) {
    this.stream = tokenRevocationStreamName(prefix);
    this.reader = streamReader(nats, this.stream);
  }

  /** Make the stream if it is not there (idempotent; the notifier at start, the CLI before it appends). */
  async ensure(): Promise<void> {
    try {
      await provision(this.nats.jsm, { streams: [tokenRevocationStreamSpec(this.prefix, this.options)] }, { retryForMs: 0 });
    } catch (error) {
      throw this.failure('cannot make the token revocation log', error);
    }
  }

  /**
   * When the log says `tokenId` was revoked (the first entry that verifies), or null when it says
   * nothing of it. @throws TokenRevocationLogError when the log cannot be read.
   */
  async revokedAt(tokenId: string): Promise<string | null> {
    const cached = this.known.get(tokenId);
    if (cached !== undefined) return cached;
    // Following and confirmed caught up: the memory holds every verified revocation (no round trip).
    if (this.live()) return null;
    const subject = tokenRevocationSubject(this.prefix, tokenId);
    let from = 1;
    for (let unverified = 0; unverified <= MAX_UNVERIFIED_PER_TOKEN; unverified++) {
      let stored;
      try {
        stored = await this.reader.nextOnSubject(subject, from);
      } catch (error) {
        throw this.failure('cannot read the token revocation log', error);
      }
      if (stored === null) return null;
      const entry = this.verified(tokenId, stored.data);
      if (entry !== null) {
        this.remember(tokenId, entry.revoked_at);
        return entry.revoked_at;
      }
      from = stored.seq + 1;
    }
    throw new TokenRevocationLogError(
      'too_many_unsigned',
      `the token revocation log holds more than ${MAX_UNVERIFIED_PER_TOKEN} entries for ${tokenId} that are not signed with the token key`,
    );
  }

  /**
   * Append the revocation of `tokenId` at `revokedAt` (signed), unless the log has one already
   * (then its time stands). @throws TokenRevocationLogError when the log cannot be written.
   */
  async record(tokenId: string, revokedAt: string): Promise<RevocationRecorded> {
    const already = await this.revokedAt(tokenId);
    if (already !== null) return { appended: false, revoked_at: already };
    const entry = { token_id: tokenId, revoked_at: revokedAt, mac: tokenRevocationMac(this.key, this.prefix, { token_id: tokenId, revoked_at: revokedAt }) };
    try {
      await this.nats.js.publish(tokenRevocationSubject(this.prefix, tokenId), JSON.stringify(entry), {
        msgID: `revoke:${tokenId}`,
        expect: { streamName: this.stream },
      });
    } catch (error) {
      throw this.failure('cannot append to the token revocation log', error);
    }
    this.remember(tokenId, revokedAt);
    return { appended: true, revoked_at: revokedAt };
  }

  /**
   * Follow the log (the notifier, from its start to its shutdown): see the module comment. Never
   * throws: a follower that cannot start (the stream missing, NATS away, credentials that may not
   * make a consumer on it) is told to `onEvent` and tried again every
   * {@link REVOCATION_FOLLOW_RETRY_MS}, lookups being direct gets meanwhile. `connection`: the
   * connection the log reads through, so that a disconnection stops answers from memory at once.
   */
  follow(options: { connection?: Pick<NatsHandle, 'connection' | 'closed'>; onEvent?: (event: RevocationFollowEvent) => void } = {}): void {
    if (this.following) return;
    this.following = true;
    this.onFollowEvent = options.onEvent ?? (() => undefined);
    if (options.connection !== undefined) {
      this.stopEvents = onConnectionEvent(options.connection, (event) => {
        if (event.kind === 'disconnected' || event.kind === 'closed') {
          this.connected = false;
          this.confirmedAt = 0;
        } else if (event.kind === 'reconnected') this.connected = true;
      });
    }
    void this.startFollower();
    this.scheduleProbe();
  }

  /** Stop following (the notifier's shutdown): lookups are direct gets again. Safe to call twice. */
  async stopFollowing(): Promise<void> {
    this.following = false;
    this.confirmedAt = 0;
    if (this.probeTimer !== null) clearTimeout(this.probeTimer);
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.probeTimer = this.retryTimer = null;
    this.stopEvents?.();
    this.stopEvents = null;
    const follower = this.follower;
    this.follower = null;
    await follower?.stop().catch(() => undefined);
  }

  /** How lookups are answered now (health, logs, tests). */
  followState(): RevocationFollowState {
    return {
      following: this.following,
      live: this.live(),
      remembered: this.known.size,
      complete: this.complete,
      lastSeq: this.follower?.lastSeq() ?? 0,
    };
  }

  /** Whether a lookup may be answered from memory now. */
  private live(): boolean {
    return this.follower !== null && this.connected && this.complete && Date.now() - this.confirmedAt <= REVOCATION_FRESH_MS;
  }

  private async startFollower(): Promise<void> {
    if (!this.following || this.follower !== null) return;
    try {
      const info = await this.nats.jsm.streams.info(this.stream);
      const follower = await this.reader.follow({
        filterSubject: tokenRevocationSubject(this.prefix, '*'),
        onMessage: (message) => this.take(message),
        // Entries are under 1 KiB: small pulls, small memory.
        batch: 256,
        pullBytes: 256 * 1024,
      });
      if (!this.following) {
        await follower.stop().catch(() => undefined);
        return;
      }
      this.streamCreated = info.created;
      this.follower = follower;
      void this.probe();
    } catch (error) {
      if (!this.following) return;
      this.onFollowEvent({ kind: 'follow_failed', error: this.failure('cannot follow the token revocation log', error) });
      this.retryTimer = setTimeout(() => {
        this.retryTimer = null;
        void this.startFollower();
      }, REVOCATION_FOLLOW_RETRY_MS);
      this.retryTimer.unref();
    }
  }

  private scheduleProbe(): void {
    if (!this.following) return;
    this.probeTimer = setTimeout(() => {
      this.probeTimer = null;
      void this.probe().finally(() => this.scheduleProbe());
    }, REVOCATION_PROBE_MS);
    this.probeTimer.unref();
  }

  /**
   * One confirmation: the stream's last sequence, asked now, is one the follower has handed over
   * already, so every entry stored before this probe was sent is in memory. A stream made anew
   * since the follower started (deleted and made again: its sequences start over) restarts it.
   */
  private async probe(): Promise<void> {
    const follower = this.follower;
    if (!this.following || follower === null) return;
    const sentAt = Date.now();
    let info;
    try {
      info = await this.nats.jsm.streams.info(this.stream);
    } catch {
      return;
    }
    if (this.follower !== follower) return;
    if (info.created !== this.streamCreated) {
      this.confirmedAt = 0;
      this.follower = null;
      this.onFollowEvent({ kind: 'restarted', why: `the stream ${this.stream} was made anew` });
      await follower.stop().catch(() => undefined);
      await this.startFollower();
      return;
    }
    if (this.connected && follower.lastSeq() >= info.state.last_seq) this.confirmedAt = Math.max(this.confirmedAt, sentAt);
  }

  /** One entry the follower handed over: remembered when it verifies for the token its subject names. */
  private take(message: FollowedMessage): void {
    const tokenId = message.subject.slice(tokenRevocationSubject(this.prefix, '').length);
    if (this.known.has(tokenId)) return;
    const entry = this.verified(tokenId, message.data);
    if (entry !== null) this.remember(tokenId, entry.revoked_at);
  }

  /** Keep a revocation in memory (the first verified time stands), within {@link MAX_REMEMBERED_REVOCATIONS}. */
  private remember(tokenId: string, revokedAt: string): void {
    if (this.known.has(tokenId)) return;
    if (this.known.size >= MAX_REMEMBERED_REVOCATIONS) {
      if (this.complete) this.onFollowEvent({ kind: 'memory_full', limit: MAX_REMEMBERED_REVOCATIONS });
      this.complete = false;
      return;
    }
    this.known.set(tokenId, revokedAt);
  }

  /** The entry in `data` when it is one for `tokenId` whose MAC verifies, else null. */
  private verified(tokenId: string, data: Uint8Array): TokenRevocationEntry | null {
    let parsed;
    try {
      parsed = TokenRevocationEntrySchema.safeParse(JSON.parse(new TextDecoder().decode(data)));
    } catch {
      return null;
    }
    if (!parsed.success || parsed.data.token_id !== tokenId) return null;
    return tokenRevocationMacValid(this.key, this.prefix, parsed.data, parsed.data.mac) ? parsed.data : null;
  }

  private failure(what: string, error: unknown): TokenRevocationLogError {
    if (error instanceof TokenRevocationLogError) return error;
    const said = error instanceof Error ? error.message : String(error);
    if (error instanceof StreamNotFound || /stream not found/i.test(said))
      return new TokenRevocationLogError('stream_missing', `${what}: the stream ${this.stream} does not exist`, { cause: error });
    if (error instanceof PermissionDenied || isPermissionsViolation(error) || /permission/i.test(said))
      return new TokenRevocationLogError(
        'permission_denied',
        `${what}: these NATS credentials may not use ${this.stream} (issue them again: baton nats-config)`,
        {
          cause: error,
        },
      );
    return new TokenRevocationLogError('unavailable', `${what}: ${said}`, { cause: error });
  }
}
