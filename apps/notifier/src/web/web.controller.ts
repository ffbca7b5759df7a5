import { createHmac, randomBytes } from 'node:crypto';
import { Controller, Get, HttpException, Inject, Param, Post, Req, Res } from '@nestjs/common';
import { z } from 'zod';
import {
  hasVisibleText,
  HoldAnswerActionSchema,
  type NextFormField,
  IdSchema,
  PersonTextSchema,
  ProjectIdSchema,
  RouteCauseSchema,
  StopAnswerActionSchema,
} from '@baton/contracts';
import { InboxWhys, InvalidCursorError, type ItemFilters } from '@baton/projections';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { projectionsUnavailable, redisFull } from '../api/http';
import { decimalOf } from '../http/body-type';
import { MeshReader } from '../api/mesh-reader';
import { OperatorActions, type RecordTarget } from '../api/operator-actions';
import { resolveProject } from '../api/resolve';
import { InboxQuerySchema } from '../api/schemas';
import { AuthFailureLimiter, clientAddress } from '../auth/auth-failures';
import { REVOCATIONS_RETRY_AFTER_SEC } from '../auth/auth.guard';
import { AuthService } from '../auth/auth.service';
import { LOGIN_CSRF_COOKIE, parseCookies, serializeCookie, SESSION_COOKIE } from '../auth/cookies';
import type { HttpRequest, HttpResponse } from '../auth/http-types';
import { canSeeProject } from '../auth/roles';
import { WebhookStatus } from '../notices/webhook-status';
import { scopedProjects } from '../auth/scope';
import { safeEqual, type Session } from '../auth/session-store';
import { INBOX_SCRIPT, STYLESHEET } from './assets';
import { inboxPage, itemCard, recordHref, type InboxFilterValues } from './inbox-page';
import { InboxReader, itemMatches } from './inbox-reader';
import { PAGE_HEADERS, type PageContext } from './layout';
import { errorPage, handoffPage, loginPage, meshPage, runPage } from './other-pages';

const FILTER_KEYS = ['project', 'why', 'agent', 'priority', 'status', 'kind'] as const;

/**
 * A refusal a web route shows as an HTML page with its status: `message` in plain words, `detail`
 * the API's own wording when the words are the page's (shown under "Details").
 */
class WebRefusal extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly detail?: string,
  ) {
    super(message);
    this.name = 'WebRefusal';
  }
}

/** What each query parameter of the inbox page takes, in words (a refused one is named so, its code kept). */
const QUERY_WORDS: Readonly<Record<string, string>> = {
  project: 'The project filter takes project names (lower-case letters, digits, _ and -), one or a comma-separated list.',
  why: `The why filter takes one of: ${InboxWhys.join(', ')}.`,
  agent: 'The agent filter takes agent names (letters, digits and _ - . : @), one or a comma-separated list.',
  priority: 'The priority filter takes urgent, high, medium or low.',
  status: 'The status filter takes open, answered, closed or any.',
  kind: 'The kind filter takes stop, hold, handback or escalation.',
  limit: 'The page size (limit) is a whole number from 1 to 500, in digits.',
  cursor: 'That page link (cursor) is not one this inbox made for these filters: start again from the first page.',
};

/** What a raised cap must be, in words, from the form's cap field (its limits), or in general. */
function capWords(field: NextFormField | undefined): string {
  if (field?.greater_than === undefined) return 'The new cap must be a number above the current cap.';
  return `The new cap must be ${field.whole ? 'a whole number' : 'a number'} above ${field.greater_than}${field.at_most !== undefined ? ` and at most ${field.at_most}` : ''}.`;
}

/** The field a schema refusal names first (`intent: Too small…` → `intent`), from its issues or its message. */
function refusedField(error: unknown): string | undefined {
  if (!(error instanceof HttpException)) return undefined;
  const body = error.getResponse() as { error?: { code?: string; message?: string; issues?: Array<{ path?: string }> } } | string;
  if (typeof body !== 'object' || body.error?.code !== 'schema_violation') return undefined;
  return body.error.issues?.[0]?.path ?? /^([a-z_]+):/.exec(body.error.message ?? '')?.[1];
}

/** A typed field (first of repeats): a person's text as the API takes it (no control characters), absent when nothing in it is visible. */
const text = z
  .preprocess((v) => (Array.isArray(v) ? v[0] : v), PersonTextSchema.optional())
  .transform((v) => (v === undefined || !hasVisibleText(v) ? undefined : v));
/** A field read as sent (first of repeats), blank included: the answer's own schema and rules judge it, as the API's. */
const asSent = z.preprocess((v) => (Array.isArray(v) ? v[0] : v), z.string().max(4000).optional());
const FormBase = z.object({ _csrf: z.string().min(1).max(200), return: text });
const StopFormSchema = FormBase.extend({
  // A stop form's buttons, as the API takes them (accept / rework are a handback's decision).
  action: StopAnswerActionSchema,
  answer_id: IdSchema,
  pending_digest: text,
  intent: asSent,
  cap: text,
  note: text,
});
const HoldFormSchema = FormBase.extend({
  action: HoldAnswerActionSchema,
  answer_id: IdSchema,
  target: text,
  note: text,
  // The hold the form was rendered for (its inbox item's cause): a newer hold refuses it (stale_answer).
  hold_cause_kind: RouteCauseSchema.shape.kind.optional(),
  hold_cause_id: IdSchema.optional(),
});
const HandbackFormSchema = FormBase.extend({ decision: z.enum(['accept', 'rework']), idempotency_key: z.string().min(1).max(200), note: text });
const AbandonFormSchema = FormBase.extend({ idempotency_key: z.string().min(1).max(200), reason: text });

/** The record an answer's banner names, as {@link WebController.sent} writes it. */
const SENT_RECORD = /^(?:stop:|handback:|run )[a-z0-9][a-z0-9_-]{0,63}:[A-Za-z0-9_\-:@]{1,128}$/;

/**
 * The signature of an answer banner (`&sig=` beside `sent` and `outcome`): an HMAC under the
 * session's secret (its CSRF token, never in a URL), so only the redirect of this session's own
 * form shows a banner, and with the outcome that form got.
 */
function bannerSignature(secret: string, what: string, outcome: string): string {
  return createHmac('sha256', secret).update(`banner\n${what}\n${outcome}`).digest('base64url').slice(0, 22);
}

/** A handoff's page as {@link recordHref} writes it (an id's `:` and `@` percent-encoded). */
const HANDOFF_PAGE = /^\/projects\/[a-z0-9][a-z0-9_-]{0,63}\/handoffs\/(?:[A-Za-z0-9_-]|%3A|%40){1,128}$/;

/** Where to go back to after a form: the inbox (with its filters), or a handoff's page (its Withdraw form), only. */
function safeReturn(value: string | undefined): string {
  return value !== undefined && (/^\/inbox(\?[A-Za-z0-9_\-.~%&=+,:@]*)?$/.test(value) || HANDOFF_PAGE.test(value)) ? value : '/inbox';
}

/** Where to go after signing in: a local path only (never another origin). */
function safeNext(value: unknown): string {
  return typeof value === 'string' && /^\/(?!\/)[A-Za-z0-9_\-./~%&=+,:@?]*$/.test(value) && !value.startsWith('/login') ? value : '/inbox';
}

/**
 * The operator's web inbox: server-rendered pages (no build step, no framework) plus one small
 * script for live updates. Pages need a browser session (sign in at /login with a token); every
 * form post carries the session's CSRF token (synchronizer pattern) and, when the browser sends
 * an Origin, it must be this host. Answers go through the same use cases as the JSON API, so the
 * answering name and role come from the session's token and a stale or already answered form is
 * refused (fail closed) and shown as such.
 */
@Controller()
export class WebController {
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    private readonly auth: AuthService,
    private readonly reader: InboxReader,
    private readonly actions: OperatorActions,
    private readonly failures: AuthFailureLimiter,
    private readonly meshes: MeshReader,
    private readonly webhooks: WebhookStatus,
  ) {}

  @Get()
  root(@Res() res: HttpResponse) {
    res.redirect(303, '/inbox');
  }

  @Get('assets/baton.css')
  css(@Res() res: HttpResponse) {
    res.setHeader('Content-Type', 'text/css; charset=utf-8');
    res.setHeader('Cache-Control', 'public, max-age=300');
    res.send(STYLESHEET);
  }

  @Get('assets/inbox.js')
  script(@Res() res: HttpResponse) {
    res.setHeader('Content-Type', 'text/javascript; charset=utf-8');
    res.setHeader('Cache-Control', 'public, max-age=300');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.send(INBOX_SCRIPT);
  }

  /** `GET /login`: the sign-in form, with a double-submit CSRF cookie for the login post. */
  @Get('login')
  loginForm(@Req() req: HttpRequest, @Res() res: HttpResponse) {
    const csrf = randomBytes(24).toString('base64url');
    res.setHeader('Set-Cookie', serializeCookie(LOGIN_CSRF_COOKIE, csrf, { maxAge: 900, path: '/login', secure: this.auth.config.NOTIFIER_COOKIE_SECURE }));
    this.send(res, 200, loginPage({ csrf, next: safeNext((req.query as Record<string, unknown> | undefined)?.['next']) }));
  }

  /** `POST /login`: check the CSRF pair and the token, open a session (HttpOnly, SameSite=Strict cookie). */
  @Post('login')
  async login(@Req() req: HttpRequest, @Res() res: HttpResponse) {
    const body = (req.body ?? {}) as Record<string, unknown>;
    const next = safeNext(body['next']);
    const cookie = parseCookies(req.headers.cookie)[LOGIN_CSRF_COOKIE];
    const field = typeof body['_csrf'] === 'string' ? body['_csrf'] : '';
    const fresh = randomBytes(24).toString('base64url');
    const again = (status: number, error: string) => {
      res.setHeader('Set-Cookie', serializeCookie(LOGIN_CSRF_COOKIE, fresh, { maxAge: 900, path: '/login', secure: this.auth.config.NOTIFIER_COOKIE_SECURE }));
      this.send(res, status, loginPage({ csrf: fresh, next, error }));
    };
    if (!this.sameOrigin(req) || !cookie || !field || !safeEqual(cookie, field)) return again(403, 'The sign-in form expired; try again.');
    // Failed sign-ins count against the client address (as failed API tokens do); past the limit
    // every sign-in from it is refused 429 until the minute ends.
    const address = clientAddress(req);
    const allowance = this.failures.check(address);
    if (allowance.blocked) {
      res.setHeader('Retry-After', String(allowance.retryAfterSec));
      this.runtime.logger.warn('web sign-in refused', { reason: 'too_many_auth_failures', address });
      return again(429, `Too many failed sign-ins from your address; try again in ${allowance.retryAfterSec} s.`);
    }
    const checked = typeof body['token'] === 'string' ? await this.auth.tokens.check(body['token']) : ({ ok: false, reason: 'malformed' } as const);
    if (!checked.ok && checked.reason === 'revocations_unavailable') {
      // The token is good as far as Redis says, and the revocation log cannot be read: an outage, not a failed sign-in.
      res.setHeader('Retry-After', String(REVOCATIONS_RETRY_AFTER_SEC));
      this.runtime.logger.warn('web sign-in deferred: the token revocation log cannot be read', { address });
      return again(503, 'Tokens cannot be checked just now (the token revocation log is unavailable); try again shortly.');
    }
    if (!checked.ok) {
      const count = this.failures.fail(address);
      this.runtime.logger.warn('web sign-in refused', { reason: checked.reason, address, failures_this_minute: count });
      return again(401, 'That token is not valid (unknown, revoked, expired or mistyped).');
    }
    const principal = checked.principal;
    // Signing in again from another tab replaces this browser's session cookie, and the pages open
    // in its other tabs carry the CSRF token of the session they were rendered for. The new session
    // keeps that token when the browser's cookie names a live session of the same token: the other
    // tabs' next posts match it (they failed csrf_failed before). A session of another token (who
    // signs in changed), or none, gets a new token: pages rendered for someone else never post as
    // this one. The token stays secret to this browser's pages, never in a URL or a readable cookie.
    const current = await this.auth.bySession(req);
    const carried = current !== null && current.principal.tokenId === principal.tokenId ? { csrf: current.csrf } : {};
    const session = await this.auth.sessions.create(principal, new Date().toISOString(), carried);
    const secure = this.auth.config.NOTIFIER_COOKIE_SECURE;
    res.setHeader('Set-Cookie', [
      serializeCookie(SESSION_COOKIE, session.id, { maxAge: this.auth.config.NOTIFIER_SESSION_TTL_SEC, secure }),
      serializeCookie(LOGIN_CSRF_COOKIE, '', { maxAge: 0, path: '/login', secure }),
    ]);
    this.runtime.logger.info('web sign-in', { token_id: principal.tokenId, operator: principal.name, role: principal.role });
    res.redirect(303, next);
  }

  /** `POST /logout`: end the session (CSRF-checked). */
  @Post('logout')
  async logout(@Req() req: HttpRequest, @Res() res: HttpResponse) {
    await this.withForm(req, res, async (session) => {
      await this.auth.sessions.destroy(session.id);
      res.setHeader('Set-Cookie', serializeCookie(SESSION_COOKIE, '', { maxAge: 0, secure: this.auth.config.NOTIFIER_COOKIE_SECURE }));
      res.redirect(303, '/login');
    });
  }

  /** `GET /inbox`: the operator inbox with filters (project, why, agent, priority, status, kind). */
  @Get('inbox')
  async inbox(@Req() req: HttpRequest, @Res() res: HttpResponse) {
    await this.withPage(req, res, async (ctx) => {
      const { filters, values, query, firstPage, cursor, limit } = this.filters(req, ctx);
      const principal = ctx.principal!;
      const [page, openCount, failingWebhooks] = await Promise.all([
        this.reader.page(filters, limit, cursor),
        this.reader.openCount(filters),
        this.webhooks.failing((project) => canSeeProject(principal, project)),
      ]);
      // An answer's banner: `stop:<project>:<id>`, `run <project>:<id>`, `handback:<project>:<id>`.
      const banner = this.banner(req, ctx, (what) => SENT_RECORD.test(what));
      this.send(
        res,
        200,
        inboxPage({
          ctx,
          filters: values,
          query,
          firstPage,
          later: cursor !== null,
          items: page.items,
          nextCursor: page.nextCursor,
          openCount,
          failingWebhooks,
          ...(banner ?? {}),
        }),
      );
    });
  }

  /**
   * `GET /inbox/ids`: JSON `{ items: [{ id, status }], open_count }` of the page the query names — its
   * filters, page size (`limit`) and `cursor` — as `/inbox` shows it (the live script reconciles
   * with it, and puts `open_count`, the open items the filters select, in the heading).
   */
  @Get('inbox/ids')
  async ids(@Req() req: HttpRequest, @Res() res: HttpResponse) {
    await this.withPage(req, res, async (ctx) => {
      const { filters, limit, cursor } = this.filters(req, ctx);
      res.setHeader('Cache-Control', 'no-store');
      res.setHeader('Content-Type', 'application/json; charset=utf-8');
      const [items, openCount] = await Promise.all([this.reader.ids(filters, limit, cursor), this.reader.openCount(filters)]);
      res.status(200).send(JSON.stringify({ items, open_count: openCount }));
    });
  }

  /** `GET /inbox/items/:id`: one item's card as an HTML fragment (204 when the filters no longer select it). */
  @Get('inbox/items/:id')
  async item(@Param('id') id: string, @Req() req: HttpRequest, @Res() res: HttpResponse) {
    await this.withPage(req, res, async (ctx) => {
      const { filters, query } = this.filters(req, ctx);
      const details = await this.reader.item(id);
      if (!details || !canSeeProject(ctx.principal!, details.item.project)) throw new WebRefusal(404, 'not_found', `inbox item ${id} does not exist`);
      if (!itemMatches(details.item, filters)) {
        res.status(204).end();
        return;
      }
      this.send(res, 200, itemCard(details, ctx, `/inbox${query}`).value);
    });
  }

  /**
   * `POST /inbox/projects/:project/stops/:id/answer` (what the forms post to) and the id-only
   * `POST /inbox/stops/:id/answer` (refused 409 `ambiguous_id` when several of the session's
   * projects hold the id): the stop packet's form → the answer is published to the router.
   */
  @Post('inbox/projects/:project/stops/:id/answer')
  answerProjectStop(@Param('project') project: string, @Param('id') id: string, @Req() req: HttpRequest, @Res() res: HttpResponse) {
    return this.answerStopOf(req, res, id, project);
  }

  @Post('inbox/stops/:id/answer')
  answerStop(@Param('id') id: string, @Req() req: HttpRequest, @Res() res: HttpResponse) {
    return this.answerStopOf(req, res, id, undefined);
  }

  private async answerStopOf(req: HttpRequest, res: HttpResponse, id: string, project: string | undefined) {
    await this.withForm(req, res, async (session) => {
      const form = this.parse(StopFormSchema, req.body);
      // The form posts every field; the cap is read only for a raise, as the API reads a form's cap.
      const ref = this.target(id, project);
      let cap: number | undefined;
      if (form.cap !== undefined && form.action === 'raise_cap') {
        cap = decimalOf(form.cap);
        if (cap === undefined) throw new WebRefusal(400, 'schema_violation', await this.stopFieldWords(ref, 'cap'), 'the cap must be a decimal number');
      }
      let answered: Awaited<ReturnType<OperatorActions['answerStop']>>;
      try {
        answered = await this.actions.answerStop(
          ref,
          {
            answer_id: form.answer_id,
            action: form.action,
            // As typed: the domain trims it and refuses a blank one (answer_incomplete), as it does for the API.
            ...(form.intent !== undefined && form.action === 'intent' ? { intent: form.intent } : {}),
            ...(cap !== undefined ? { cap } : {}),
            ...(form.note !== undefined ? { note: form.note } : {}),
            ...(form.pending_digest !== undefined ? { pending_digest: form.pending_digest } : {}),
          },
          session.principal,
        );
      } catch (error) {
        // The answer's schema names the field it refuses in its own terms (`intent: Too small:
        // expected string to have >=1 characters`): the page says it in words, the code and the
        // API's text kept.
        const field = refusedField(error);
        if (field === 'intent' || field === 'cap') {
          throw new WebRefusal(400, 'schema_violation', await this.stopFieldWords(ref, field), this.refusalOf(error).message);
        }
        throw error;
      }
      res.redirect(303, this.sent(session, form.return, `stop:${answered.body.project}:${ref.id}`, answered.body.outcome));
    });
  }

  /**
   * What a stop's `intent` or `cap` field takes, in words, from the packet's form when the route
   * names its project (the raise form's limits: "a whole number above 10"), else in general.
   */
  private async stopFieldWords(ref: RecordTarget, field: 'intent' | 'cap'): Promise<string> {
    const record = ref.project !== undefined ? await this.reader.views.stop(ref.project, ref.id).catch(() => null) : null;
    const formField = record?.stop.next_form?.fields.find((f) => f.id === field);
    if (field === 'cap') return capWords(formField);
    return formField?.kind === 'text'
      ? 'Type the kind of request before pressing Route.'
      : formField?.kind === 'select'
        ? 'Choose the kind of request from the list before pressing Route.'
        : 'Choose or type the kind of request before pressing Route.';
  }

  /** `POST /inbox/projects/:project/runs/:id/answer` (and the id-only `POST /inbox/runs/:id/answer`): a hold's form (continue / reroute / terminate). */
  @Post('inbox/projects/:project/runs/:id/answer')
  answerProjectHold(@Param('project') project: string, @Param('id') id: string, @Req() req: HttpRequest, @Res() res: HttpResponse) {
    return this.answerHoldOf(req, res, id, project);
  }

  @Post('inbox/runs/:id/answer')
  answerHold(@Param('id') id: string, @Req() req: HttpRequest, @Res() res: HttpResponse) {
    return this.answerHoldOf(req, res, id, undefined);
  }

  private async answerHoldOf(req: HttpRequest, res: HttpResponse, id: string, project: string | undefined) {
    await this.withForm(req, res, async (session) => {
      const form = this.parse(HoldFormSchema, req.body);
      const ref = this.target(id, project);
      const answered = await this.actions.answerHold(
        ref,
        {
          answer_id: form.answer_id,
          action: form.action,
          ...(form.target !== undefined && form.action === 'reroute' ? { target: form.target.trim() } : {}),
          ...(form.note !== undefined ? { note: form.note } : {}),
          ...(form.hold_cause_kind !== undefined && form.hold_cause_id !== undefined
            ? { hold_cause: { kind: form.hold_cause_kind, id: form.hold_cause_id } }
            : {}),
        },
        session.principal,
      );
      res.redirect(303, this.sent(session, form.return, `run ${answered.body.project}:${ref.id}`, answered.body.outcome));
    });
  }

  /** `POST /inbox/projects/:project/handoffs/:id/decision` (and the id-only `POST /inbox/handoffs/:id/decision`): accept or rework a completion handback (with a note). */
  @Post('inbox/projects/:project/handoffs/:id/decision')
  decideProject(@Param('project') project: string, @Param('id') id: string, @Req() req: HttpRequest, @Res() res: HttpResponse) {
    return this.decideOf(req, res, id, project);
  }

  @Post('inbox/handoffs/:id/decision')
  decide(@Param('id') id: string, @Req() req: HttpRequest, @Res() res: HttpResponse) {
    return this.decideOf(req, res, id, undefined);
  }

  private async decideOf(req: HttpRequest, res: HttpResponse, id: string, project: string | undefined) {
    await this.withForm(req, res, async (session) => {
      const form = this.parse(HandbackFormSchema, req.body);
      if (form.decision === 'rework' && form.note === undefined) throw new WebRefusal(400, 'schema_violation', 'a rework says what to change: write a note');
      const ref = this.target(id, project);
      const decided = await this.actions.decideHandback(
        ref,
        { decision: form.decision, idempotency_key: form.idempotency_key, ...(form.note !== undefined ? { note: form.note } : {}) },
        session.principal,
      );
      res.redirect(303, this.sent(session, form.return, `handback:${decided.handoff.project}:${ref.id}`, decided.outcome));
    });
  }

  /**
   * `POST /projects/:project/handoffs/:id/abandon` (what the handoff page's Withdraw form posts
   * to) and the id-only `POST /handoffs/:id/abandon`: withdraw an open handoff, saying why, as the
   * API's abandon does; back to the handoff page.
   */
  @Post('projects/:project/handoffs/:id/abandon')
  abandonProject(@Param('project') project: string, @Param('id') id: string, @Req() req: HttpRequest, @Res() res: HttpResponse) {
    return this.abandonOf(req, res, id, project);
  }

  @Post('handoffs/:id/abandon')
  abandon(@Param('id') id: string, @Req() req: HttpRequest, @Res() res: HttpResponse) {
    return this.abandonOf(req, res, id, undefined);
  }

  private async abandonOf(req: HttpRequest, res: HttpResponse, id: string, project: string | undefined) {
    await this.withForm(req, res, async (session) => {
      const form = this.parse(AbandonFormSchema, req.body);
      // Refused here as the API's schema refuses it, before anything reaches the ledger.
      if (form.reason === undefined) throw new WebRefusal(400, 'schema_violation', 'reason: a withdrawal says why: write a reason');
      const ref = this.target(id, project);
      const abandoned = await this.actions.abandonHandoff(ref, { reason: form.reason.trim(), idempotency_key: form.idempotency_key }, session.principal);
      const here = recordHref('handoffs', abandoned.handoff.project, ref.id);
      res.redirect(303, this.sent(session, form.return ?? here, `abandon:${abandoned.handoff.project}:${ref.id}`, abandoned.outcome));
    });
  }

  /** `GET /projects/:project/runs/:id`: the run's timeline page. */
  @Get('projects/:project/runs/:id')
  async run(@Param('project') project: string, @Param('id') id: string, @Req() req: HttpRequest, @Res() res: HttpResponse) {
    await this.withPage(req, res, async (ctx) => {
      const ref = this.target(id, project);
      const view = canSeeProject(ctx.principal!, ref.project!) ? await this.reader.views.run(ref.project!, ref.id) : null;
      if (!view) throw new WebRefusal(404, 'not_found', `run ${id} does not exist in project ${project}`);
      const [stops, handoffs] = await Promise.all([
        this.reader.views.stops({ run: ref.id, filters: { project: ref.project! }, limit: 100 }),
        this.reader.views.runHandoffs(ref.project!, ref.id),
      ]);
      this.send(res, 200, runPage({ ctx, run: view.run, timeline: view.timeline, stops: stops.items, handoffs }));
    });
  }

  /** `GET /projects/:project/handoffs/:id`: a handoff, its Withdraw form while open, and its timeline. */
  @Get('projects/:project/handoffs/:id')
  async handoff(@Param('project') project: string, @Param('id') id: string, @Req() req: HttpRequest, @Res() res: HttpResponse) {
    await this.withPage(req, res, async (ctx) => {
      const ref = this.target(id, project);
      const view = canSeeProject(ctx.principal!, ref.project!) ? await this.reader.views.handoff(ref.project!, ref.id) : null;
      if (!view) throw new WebRefusal(404, 'not_found', `handoff ${id} does not exist in project ${project}`);
      // Only this handoff's own Withdraw redirect says it was withdrawn (never another record's banner).
      const withdrawn = this.banner(req, ctx, (what) => what === `abandon:${ref.project}:${ref.id}`) !== undefined;
      this.send(res, 200, handoffPage({ ctx, handoff: view.handoff, timeline: view.timeline, withdrawn }));
    });
  }

  /**
   * `GET /projects/:project/meshes/:id`: a handoff mesh run (turns, handoffs taken, ignored calls
   * and why, cap, outcome), read from the events stream; the inbox's mesh stop items link here.
   */
  @Get('projects/:project/meshes/:id')
  async mesh(@Param('project') project: string, @Param('id') id: string, @Req() req: HttpRequest, @Res() res: HttpResponse) {
    await this.withPage(req, res, async (ctx) => {
      const ref = this.target(id, project);
      const read = canSeeProject(ctx.principal!, ref.project!) ? await this.meshes.read(ref.project!, ref.id) : null;
      if (!read) throw new WebRefusal(404, 'not_found', `mesh run ${id} does not exist in project ${project}`);
      this.send(res, 200, meshPage({ ctx, mesh: read.mesh, timeline: read.timeline }));
    });
  }

  /** `GET /meshes/:id` (id only): redirect to the project page, as runs and handoffs do. */
  @Get('meshes/:id')
  async meshById(@Param('id') id: string, @Req() req: HttpRequest, @Res() res: HttpResponse) {
    await this.withPage(req, res, async (ctx) => {
      const ref = this.target(id, undefined);
      const page = (project: string) => recordHref('meshes', project, ref.id);
      res.redirect(303, page(await this.meshes.project(ctx.principal!, ref.id, undefined, page)));
    });
  }

  /**
   * `GET /runs/:id` and `GET /handoffs/:id` (id only): redirect to the project page when exactly
   * one of the session's projects holds the id; 404 when none does; 409 `ambiguous_id` naming the
   * projects when several do (never one of them silently).
   */
  @Get('runs/:id')
  runById(@Param('id') id: string, @Req() req: HttpRequest, @Res() res: HttpResponse) {
    return this.redirectById(req, res, 'run', id);
  }

  @Get('handoffs/:id')
  handoffById(@Param('id') id: string, @Req() req: HttpRequest, @Res() res: HttpResponse) {
    return this.redirectById(req, res, 'handoff', id);
  }

  private async redirectById(req: HttpRequest, res: HttpResponse, kind: 'run' | 'handoff', id: string): Promise<void> {
    await this.withPage(req, res, async (ctx) => {
      const ref = this.target(id, undefined);
      const page = (project: string) => recordHref(kind === 'run' ? 'runs' : 'handoffs', project, ref.id);
      // Ambiguous: the refusal page names each project's page, not the API's routes.
      const project = await resolveProject(this.reader.views, ctx.principal!, kind, ref.id, undefined, page);
      res.redirect(303, page(project));
    });
  }

  // -------------------------------------------------------------------------------------------

  private send(res: HttpResponse, status: number, body: string): void {
    for (const [name, value] of Object.entries(PAGE_HEADERS)) res.setHeader(name, value);
    res.status(status).send(body);
  }

  /**
   * Back to the inbox after an answer (to the handoff page after a Withdraw), saying what happened:
   * `outcome=applied` (the router or the ledger applied it) or `outcome=pending` (published, not
   * decided within NOTIFIER_ANSWER_WAIT_MS). A refused answer never gets here: it is shown as a
   * refusal page with its code (409).
   */
  private sent(session: Session, returnTo: string | undefined, what: string, outcome: 'applied' | 'pending'): string {
    const base = safeReturn(returnTo);
    return `${base}${base.includes('?') ? '&' : '?'}sent=${encodeURIComponent(what)}&outcome=${outcome}&sig=${bannerSignature(session.csrf, what, outcome)}`;
  }

  /**
   * The banner a page shows: only what this session's own form redirected with (`sent` naming a
   * record `accepts` takes, signed with the session's secret), so a link of anyone's making puts
   * neither a message of its own nor a false "applied" on the page.
   */
  private banner(req: HttpRequest, ctx: PageContext, accepts: (what: string) => boolean): { sent: string; outcome: 'applied' | 'pending' } | undefined {
    const raw = (req.query ?? {}) as Record<string, unknown>;
    const outcome = raw['outcome'] === 'applied' ? 'applied' : 'pending';
    const sent = raw['sent'];
    return typeof sent === 'string' &&
      accepts(sent) &&
      ctx.csrf !== null &&
      typeof raw['sig'] === 'string' &&
      safeEqual(raw['sig'], bannerSignature(ctx.csrf, sent, outcome))
      ? { sent, outcome }
      : undefined;
  }

  /** The record a route names: its id, and its project when the path has one (400 when malformed). */
  private target(id: string, project: string | undefined): RecordTarget {
    return { id: this.parse(IdSchema, id), ...(project !== undefined ? { project: this.parse(ProjectIdSchema, project) } : {}) };
  }

  private parse<S extends z.ZodType>(schema: S, input: unknown): z.infer<S> {
    const parsed = schema.safeParse(input);
    if (parsed.success) return parsed.data;
    throw new WebRefusal(400, 'schema_violation', parsed.error.issues.map((i) => `${i.path.join('.') || 'form'}: ${i.message}`).join('; '));
  }

  /**
   * The inbox filters of the query, scoped to the caller's projects, with the page size (`limit`,
   * 1–500 as the API takes it, 50 when absent) and the page's cursor. `query` is the page's own
   * (filters, limit, cursor), `firstPage` the first page's (filters, limit).
   */
  private filters(
    req: HttpRequest,
    ctx: PageContext,
  ): { filters: ItemFilters; values: InboxFilterValues; query: string; firstPage: string; cursor: string | null; limit: number } {
    const raw = (req.query ?? {}) as Record<string, unknown>;
    const picked: Record<string, string> = {};
    for (const key of [...FILTER_KEYS, 'limit'] as const) {
      const value = raw[key];
      // Repeated (`?status=open&status=closed`): refused as the API refuses it, never dropped.
      if (Array.isArray(value)) throw new WebRefusal(400, 'schema_violation', `${key}: give it once (several values as one comma-separated list)`);
      if (typeof value === 'string' && value.trim() !== '') picked[key] = value.trim();
    }
    const given = typeof raw['cursor'] === 'string' && raw['cursor'] ? raw['cursor'] : undefined;
    const parsed = InboxQuerySchema.safeParse({ ...picked, ...(given !== undefined ? { cursor: given } : {}) });
    if (!parsed.success) {
      // Said in words (`why=bogus`: the whys the filter takes), the code and zod's text kept.
      const issues = parsed.error.issues;
      const words = [...new Set(issues.map((i) => QUERY_WORDS[String(i.path[0])] ?? `${i.path.join('.') || 'query'}: ${i.message}`))].join(' ');
      throw new WebRefusal(400, 'schema_violation', words, issues.map((i) => `${i.path.join('.') || 'query'}: ${i.message}`).join('; '));
    }
    const q = parsed.data;
    let projects: string[] | undefined;
    try {
      projects = scopedProjects(ctx.principal!, q.project);
    } catch (error) {
      if (error instanceof HttpException) throw new WebRefusal(403, 'project_forbidden', 'you may not read that project');
      throw error;
    }
    const filters: ItemFilters = {
      ...(projects ? { project: projects } : {}),
      ...(q.kind ? { kind: q.kind } : {}),
      ...(q.why ? { why: q.why } : {}),
      ...(q.agent ? { agent: q.agent } : {}),
      ...(q.priority ? { priority: q.priority } : {}),
      ...(q.status !== 'any' ? { status: q.status } : {}),
    };
    const first = new URLSearchParams(picked).toString();
    const own = new URLSearchParams({ ...picked, ...(q.cursor !== undefined ? { cursor: q.cursor } : {}) }).toString();
    const values: InboxFilterValues = { status: picked['status'] ?? 'open' };
    for (const key of ['project', 'why', 'agent', 'priority', 'kind'] as const) if (picked[key] !== undefined) values[key] = picked[key];
    return { filters, values, query: own ? `?${own}` : '', firstPage: first ? `?${first}` : '', cursor: q.cursor ?? null, limit: q.limit };
  }

  /** A page: needs a session (else → /login); refusals render as pages. */
  private async withPage(req: HttpRequest, res: HttpResponse, body: (ctx: PageContext) => Promise<void>): Promise<void> {
    const session = await this.auth.sessionOf(req);
    if (session === 'unavailable') return this.revocationsUnavailable(res, safeNext(req.originalUrl), 'This page');
    if (!session) {
      res.redirect(303, `/login?next=${encodeURIComponent(safeNext(req.originalUrl))}`);
      return;
    }
    const ctx: PageContext = { principal: session.principal, csrf: session.csrf };
    await this.guarded(res, ctx, '/inbox', () => body(ctx));
  }

  /** A form post: needs a session, the session's CSRF token and (when sent) a same-origin Origin. */
  private async withForm(req: HttpRequest, res: HttpResponse, body: (session: Session) => Promise<void>): Promise<void> {
    const session = await this.auth.sessionOf(req);
    const fields = (req.body ?? {}) as Record<string, unknown>;
    const back = safeReturn(typeof fields['return'] === 'string' ? fields['return'] : undefined);
    if (session === 'unavailable') return this.revocationsUnavailable(res, null, 'Nothing was sent: your answer');
    if (!session) {
      // Signed out, or its token revoked or expired: nothing was sent. The page links to the
      // sign-in page, which comes back to where the form was (the inbox puts the typed text back).
      this.send(
        res,
        401,
        errorPage(
          { principal: null, csrf: null },
          {
            status: 401,
            code: 'unauthenticated',
            message: 'Your session ended (signed out, or its token revoked or expired): nothing was sent.',
            back,
            signIn: back,
          },
        ),
      );
      return;
    }
    const ctx: PageContext = { principal: session.principal, csrf: session.csrf };
    const token = typeof fields['_csrf'] === 'string' ? fields['_csrf'] : '';
    if (!this.sameOrigin(req) || !token || !safeEqual(token, session.csrf)) {
      this.runtime.logger.warn('web form refused', { reason: 'csrf', path: req.path, token_id: session.principal.tokenId });
      this.send(
        res,
        403,
        errorPage(ctx, {
          status: 403,
          code: 'csrf_failed',
          message:
            'The form is missing its CSRF token or came from another site (or this browser signed in since as another token). Reload the page and try again.',
          back,
        }),
      );
      return;
    }
    await this.guarded(res, ctx, back, () => body(session));
  }

  /**
   * The token revocation log cannot be read (NATS down or slow): the session is not ended, so the
   * browser is not sent to sign in; a 503 page with `Retry-After` says to try again shortly.
   * `retry`: the page to load again (a page), or null (a form: the browser's back button keeps what was typed).
   */
  private revocationsUnavailable(res: HttpResponse, retry: string | null, what: string): void {
    res.setHeader('Retry-After', String(REVOCATIONS_RETRY_AFTER_SEC));
    this.send(
      res,
      503,
      errorPage(
        { principal: null, csrf: null },
        {
          status: 503,
          code: 'revocations_unavailable',
          message: `${what} cannot be served just now: the notifier cannot check sign-ins against the token revocation log (NATS is unavailable). You are still signed in; try again shortly.`,
          ...(retry !== null ? { retry } : {}),
        },
      ),
    );
  }

  private async guarded(res: HttpResponse, ctx: PageContext, back: string, body: () => Promise<void>): Promise<void> {
    try {
      await body();
    } catch (error) {
      if (res.writableEnded) return;
      const refusal = this.refusalOf(error);
      this.send(res, refusal.status, errorPage(ctx, { ...refusal, back }));
    }
  }

  private refusalOf(error: unknown): { status: number; code: string; message: string; detail?: string } {
    if (error instanceof WebRefusal)
      return { status: error.status, code: error.code, message: error.message, ...(error.detail !== undefined ? { detail: error.detail } : {}) };
    if (error instanceof HttpException) {
      const body = error.getResponse() as { error?: { code?: string; message?: string } } | string;
      if (typeof body === 'object' && body.error)
        return { status: error.getStatus(), code: body.error.code ?? 'refused', message: body.error.message ?? error.message };
      return { status: error.getStatus(), code: 'refused', message: error.message };
    }
    if (error instanceof z.ZodError) return { status: 400, code: 'schema_violation', message: error.issues.map((i) => i.message).join('; ') };
    if (error instanceof InvalidCursorError)
      return { status: 400, code: 'schema_violation', message: QUERY_WORDS['cursor']!, detail: `cursor: ${error.message}` };
    if (projectionsUnavailable(error)) {
      this.runtime.logger.warn('web request: redis unavailable', { error: (error as Error).message });
      return { status: 503, code: 'projections_unavailable', message: 'The inbox store (Redis) did not answer in time; try again in a moment.' };
    }
    if (redisFull(error)) {
      this.runtime.logger.warn('web request: redis full', { error: (error as Error).message });
      return {
        status: 503,
        code: 'redis_full',
        message: 'The inbox store (Redis) is full and takes no writes; reading still works. Try again once the operators made room.',
      };
    }
    this.runtime.logger.error('web request failed', { error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    return { status: 500, code: 'internal_error', message: 'The request failed; see the notifier log.' };
  }

  /** When the browser sends Origin (it does on every POST), it must name this host. */
  private sameOrigin(req: HttpRequest): boolean {
    const origin = req.headers.origin;
    if (origin === undefined) return true;
    try {
      return new URL(origin).host === req.headers.host;
    } catch {
      return false;
    }
  }
}
