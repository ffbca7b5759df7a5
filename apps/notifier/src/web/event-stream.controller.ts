import { BeforeApplicationShutdown, Controller, Get, HttpStatus, Inject, Injectable, OnModuleInit, Req, Res, UseFilters, UseGuards } from '@nestjs/common';
import type { SequencedEvent } from '@baton/projections';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { ApiError, ApiExceptionFilter, parseOr400 } from '../api/http';
import { EventStreamQuerySchema } from '../api/schemas';
import { scopedProjects } from '../auth/scope';
import { ApiAuthGuard } from '../auth/auth.guard';
import { AuthService } from '../auth/auth.service';
import { NOTIFIER_CONFIG, type NotifierConfig } from '../notifier.config';
import type { HttpRequest, HttpResponse } from '../auth/http-types';
import { canSeeProject, type Principal } from '../auth/roles';
import { AppliedEvents } from '../projection/applied-events';

/** The run events that open, change or close an inbox item. */
const INBOX_RUN_EVENTS = new Set(['run.held', 'run.stopped', 'run.resumed', 'run.completed', 'run.terminated']);

/** True when the inbox projection may have changed an item for this event. */
export function touchesInbox(event: Pick<SequencedEvent, 'type'>): boolean {
  return INBOX_RUN_EVENTS.has(event.type) || event.type.startsWith('handoff.');
}

/** What one `inbox` server-sent event carries: which aggregate changed, never agent text. */
export interface InboxChange {
  seq: number;
  project: string;
  event_type: string;
  aggregate: { kind: string; id: string };
}

const HEARTBEAT_MS = 15_000;
/** How long a client refused for too many streams should wait before trying again. */
const STREAM_RETRY_AFTER_SEC = 10;
/**
 * What a stream may hold unsent in the notifier's memory (after the socket's own buffers filled):
 * a client that stops reading is closed (`event: closed`, reason `slow_consumer`) once this much
 * waits, instead of every later inbox event piling up for it.
 */
export const STREAM_MAX_UNSENT_BYTES = 1024 * 1024;

/** One open live stream: who holds it and how to end it. */
interface OpenStream {
  principal: Principal;
  /** The browser session that opened it, when one did (signing out ends the stream too). */
  sessionId: string | null;
  /** End the stream; `reason` is sent first as `event: closed` when the stream is still writable. */
  close(reason?: string): void;
}

/**
 * The open live streams: capped per token (`NOTIFIER_STREAMS_PER_TOKEN`, a token's browser
 * sessions included) and in total (`NOTIFIER_STREAMS_MAX`); re-checked every
 * `NOTIFIER_STREAM_AUTH_CHECK_MS` against the token store, so a stream whose token was revoked or
 * expired (or whose session signed out) is closed; all closed when the service stops (so HTTP
 * shutdown is not held open).
 */
@Injectable()
export class EventStreams implements OnModuleInit, BeforeApplicationShutdown {
  private readonly open = new Set<OpenStream>();
  private timer: NodeJS.Timeout | null = null;
  private checking = false;

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(NOTIFIER_CONFIG) private readonly config: NotifierConfig,
    private readonly auth: AuthService,
  ) {}

  onModuleInit(): void {
    this.timer = setInterval(() => void this.recheck(), this.config.NOTIFIER_STREAM_AUTH_CHECK_MS);
    this.timer.unref();
  }

  /**
   * Why `principal` may not open another stream now (429 `too_many_streams`, with the limit hit),
   * or null when it may.
   */
  refusal(principal: Principal): ApiError | null {
    const total = this.config.NOTIFIER_STREAMS_MAX;
    const perToken = this.config.NOTIFIER_STREAMS_PER_TOKEN;
    if (this.open.size >= total) {
      return new ApiError(HttpStatus.TOO_MANY_REQUESTS, 'too_many_streams', `the notifier serves at most ${total} live streams; try again later`, [], {
        scope: 'total',
        limit: total,
        retry_after_sec: STREAM_RETRY_AFTER_SEC,
      });
    }
    const mine = this.countOf(principal.tokenId);
    if (mine >= perToken) {
      return new ApiError(
        HttpStatus.TOO_MANY_REQUESTS,
        'too_many_streams',
        `this token holds ${mine} live streams already (at most ${perToken}); close one first`,
        [],
        { scope: 'token', limit: perToken, retry_after_sec: STREAM_RETRY_AFTER_SEC },
      );
    }
    return null;
  }

  add(stream: OpenStream): () => void {
    this.open.add(stream);
    return () => this.open.delete(stream);
  }

  count(): number {
    return this.open.size;
  }

  countOf(tokenId: string): number {
    let n = 0;
    for (const stream of this.open) if (stream.principal.tokenId === tokenId) n++;
    return n;
  }

  /**
   * Close the streams whose token is no longer valid (revoked, expired, its record gone) or whose
   * browser session ended. A token store that cannot be read (Redis away) closes nothing: a
   * revocation is a Redis write, so none can have happened that this check would miss for long;
   * nor does a token revocation log that cannot be read (an outage: the next check decides).
   */
  async recheck(): Promise<number> {
    if (this.checking || this.open.size === 0) return 0;
    this.checking = true;
    let closed = 0;
    try {
      const byToken = new Map<string, OpenStream[]>();
      for (const stream of this.open) byToken.set(stream.principal.tokenId, [...(byToken.get(stream.principal.tokenId) ?? []), stream]);
      for (const [tokenId, streams] of byToken) {
        const checked = await this.auth.tokens.principalCheck(tokenId, 'token');
        // The revocation log cannot be read now (an outage): nothing is known to have ended; checked again next time.
        if (!checked.ok && checked.reason === 'revocations_unavailable') continue;
        const valid = checked.ok;
        for (const stream of streams) {
          const session = !valid || stream.sessionId === null ? null : await this.auth.sessions.lookup(stream.sessionId);
          const ended = !valid || (session !== null && !session.ok && session.reason === 'ended');
          if (!ended) continue;
          stream.close(valid ? 'session_ended' : 'token_invalid');
          closed++;
        }
        if (!valid) this.runtime.logger.info('live streams closed: their token is revoked or expired', { token_id: tokenId, streams: streams.length });
      }
    } catch (error) {
      this.runtime.logger.warn('live streams: cannot re-check their tokens now', { error: (error as Error).message });
    } finally {
      this.checking = false;
    }
    return closed;
  }

  beforeApplicationShutdown(): void {
    if (this.timer) clearInterval(this.timer);
    for (const stream of [...this.open]) stream.close();
    this.open.clear();
  }
}

/**
 * `GET /v1/events/stream`: server-sent events for the live inbox. After the projections apply an
 * event that touches the inbox, every stream whose caller may see the event's project receives
 * `event: inbox` with an {@link InboxChange} (`id:` = the stream sequence). The first frame is
 * `event: ready`; a comment line every 15 s keeps proxies from closing an idle stream.
 * Authenticated by bearer token or the browser session (it is a GET, see ApiAuthGuard). Capped
 * per token and in total (429 `too_many_streams` with `Retry-After`); a stream whose token is
 * revoked or expires (or whose session signs out) receives `event: closed` and ends.
 */
@UseFilters(ApiExceptionFilter)
@UseGuards(ApiAuthGuard)
@Controller('v1/events')
export class EventStreamController {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    private readonly applied: AppliedEvents,
    private readonly streams: EventStreams,
  ) {}

  @Get('stream')
  stream(@Req() req: HttpRequest, @Res() res: HttpResponse): void {
    const principal = req.principal as Principal;
    // `?project=` narrows the stream to projects the token may see (403 `project_forbidden` for any other), as on every listing.
    const requested = parseOr400(EventStreamQuerySchema, req.query).project;
    const only = requested === undefined ? null : new Set(scopedProjects(principal, requested));
    const refused = this.streams.refusal(principal);
    if (refused) {
      res.setHeader('Retry-After', String(STREAM_RETRY_AFTER_SEC));
      this.runtime.logger.warn('live stream refused', {
        token_id: principal.tokenId,
        reason: (refused.getResponse() as { error: { details: { scope: string } } }).error.details.scope,
        streams: this.streams.count(),
      });
      throw refused;
    }
    // The client may have gone while the guard authenticated it: its `close` has been emitted
    // already and would never free the stream's place.
    if (req.destroyed === true || res.destroyed) return;
    res.status(200);
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Connection', 'keep-alive');
    res.setHeader('X-Accel-Buffering', 'no');
    res.flushHeaders();
    res.write('retry: 2000\n\nevent: ready\ndata: {}\n\n');
    const unsubscribe = this.applied.subscribe((event) => {
      if (!touchesInbox(event) || !canSeeProject(principal, event.project) || (only !== null && !only.has(event.project))) return;
      const change: InboxChange = {
        seq: event.seq,
        project: event.project,
        event_type: event.type,
        aggregate: { kind: event.aggregate.kind, id: event.aggregate.id },
      };
      send(`id: ${event.seq}\nevent: inbox\ndata: ${JSON.stringify(change)}\n\n`);
    });
    const send = (frame: string) => {
      if (closed) return;
      if (res.writableLength > STREAM_MAX_UNSENT_BYTES) return close('slow_consumer');
      res.write(frame);
    };
    const heartbeat = setInterval(() => send(': ping\n\n'), HEARTBEAT_MS);
    heartbeat.unref();
    let closed = false;
    const close = (reason?: string) => {
      if (closed) return;
      closed = true;
      clearInterval(heartbeat);
      unsubscribe();
      forget();
      if (res.writableEnded) return;
      if (reason !== undefined) res.write(`event: closed\ndata: ${JSON.stringify({ reason })}\n\n`);
      res.end();
    };
    const forget = this.streams.add({ principal, sessionId: req.session?.id ?? null, close });
    res.on('close', () => close());
    this.runtime.logger.debug('event stream opened', { token_id: principal.tokenId, streams: this.streams.count() });
  }
}
