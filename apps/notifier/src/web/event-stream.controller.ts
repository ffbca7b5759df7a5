import { BeforeApplicationShutdown, Controller, Get, Inject, Injectable, Req, Res, UseFilters, UseGuards } from '@nestjs/common';
import type { SequencedEvent } from '@baton/projections';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { ApiExceptionFilter } from '../api/http';
import { ApiAuthGuard } from '../auth/auth.guard';
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

/** The open event streams, closed when the service stops (so HTTP shutdown is not held open). */
@Injectable()
export class EventStreams implements BeforeApplicationShutdown {
  private readonly open = new Set<() => void>();

  add(close: () => void): () => void {
    this.open.add(close);
    return () => this.open.delete(close);
  }

  count(): number {
    return this.open.size;
  }

  beforeApplicationShutdown(): void {
    for (const close of [...this.open]) close();
    this.open.clear();
  }
}

/**
 * `GET /v1/events/stream`: server-sent events for the live inbox. After the projections apply an
 * event that touches the inbox, every stream whose caller may see the event's project receives
 * `event: inbox` with an {@link InboxChange} (`id:` = the stream sequence). The first frame is
 * `event: ready`; a comment line every 15 s keeps proxies from closing an idle stream.
 * Authenticated by bearer token or the browser session (it is a GET, see ApiAuthGuard).
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
    res.status(200);
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Connection', 'keep-alive');
    res.setHeader('X-Accel-Buffering', 'no');
    res.flushHeaders();
    res.write('retry: 2000\n\nevent: ready\ndata: {}\n\n');
    const unsubscribe = this.applied.subscribe((event) => {
      if (!touchesInbox(event) || !canSeeProject(principal, event.project)) return;
      const change: InboxChange = { seq: event.seq, project: event.project, event_type: event.type, aggregate: { kind: event.aggregate.kind, id: event.aggregate.id } };
      res.write(`id: ${event.seq}\nevent: inbox\ndata: ${JSON.stringify(change)}\n\n`);
    });
    const heartbeat = setInterval(() => res.write(': ping\n\n'), HEARTBEAT_MS);
    heartbeat.unref();
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      clearInterval(heartbeat);
      unsubscribe();
      forget();
      if (!res.writableEnded) res.end();
    };
    const forget = this.streams.add(close);
    req.on('close', close);
    this.runtime.logger.debug('event stream opened', { token_id: principal.tokenId, streams: this.streams.count() });
  }
}
