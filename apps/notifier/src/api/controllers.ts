import { Body, Controller, Get, Header, Headers, HttpCode, Inject, Param, Post, Query, Res, UseFilters, UseGuards } from '@nestjs/common';
import type { z } from 'zod';
import { formNumbers } from '../http/body-type';
import { isoMs, type BatonViews, type ItemFilters } from '@baton/projections';
import { BATON_VIEWS } from '../projection/tokens';
import { ApiAuthGuard, Caller } from '../auth/auth.guard';
import type { HttpResponse } from '../auth/http-types';
import type { Principal } from '../auth/roles';
import { assertCanAnswer, assertVisible, scopedProjects } from '../auth/scope';
import { ApiExceptionFilter, NoQuery, notFound, parseOr400, parseParam } from './http';
import { MeshReader } from './mesh-reader';
import { NoticeRedelivery } from './notice-redelivery';
import { WebhookStatus } from '../notices/webhook-status';
import { buildOpenApiDocument, docsPage } from './openapi';
import { OperatorActions, type AnswerReply, type RecordTarget } from './operator-actions';
import { ProjectControls } from './project-controls';
import { resolveProject } from './resolve';
import {
  AbandonHandoffBodySchema,
  NoticeRedeliverBodySchema,
  HandbackDecisionBodySchema,
  PauseBodySchema,
  ResumeBodySchema,
  HoldAnswerBodySchema,
  IdParamSchema,
  InboxQuerySchema,
  ProjectParamSchema,
  StopAnswerBodySchema,
  StopsQuerySchema,
} from './schemas';

/** The stop answer's numeric fields: a form sends them as text. */
const STOP_ANSWER_NUMBERS = ['cap'] as const;
/**
 * Controllers are thin: parse with zod (400 on failure), call the read side or a use case, shape
 * the reply. Every `/v1` route needs an authenticated caller ({@link ApiAuthGuard}) and shows or
 * acts on the caller's projects only: listings are narrowed to them, and an item of another
 * project answers 404 as if it did not exist.
 *
 * Runs, handoffs and stop packets are addressed by project and id (`/v1/projects/:project/...`):
 * an id is unique only within its project. The id-only routes (`/v1/runs/:id`...) remain as a
 * convenience and answer only when the id is unambiguous among the caller's projects: 404 when
 * none holds it, 409 `ambiguous_id` (listing the projects) when several do.
 */

/**
 * An operator action's body, read only once the caller may act at all: a viewer is told 403
 * `role_forbidden` whatever it sent, not a 400 about a body it may not send anyway.
 */
function actionBody<T extends z.ZodType>(caller: Principal, schema: T, body: unknown, what?: string): z.infer<T> {
  assertCanAnswer(caller, ...(what !== undefined ? [what] : []));
  return parseOr400(schema, body);
}

/** The record of a route: its id, and the project when the route names it. */
function target(id: string, project?: string): RecordTarget {
  return { id: parseParam('id', IdParamSchema, id), ...(project !== undefined ? { project: parseParam('project', ProjectParamSchema, project) } : {}) };
}

/**
 * Write an answer's reply with its status: 200 when the router applied it (the outcome and the
 * new state), 202 when it was not decided in time (`status_url`). Refusals are thrown (409).
 */
async function reply(res: HttpResponse, answered: Promise<AnswerReply>): Promise<void> {
  const { status, body } = await answered;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  if (status === 202) res.setHeader('Location', body.status_url);
  res.status(status).send(JSON.stringify(body));
}

/** Reads of runs, handoffs and stop packets, shared by the project routes and the id-only ones. */
class RecordReads {
  constructor(private readonly views: BatonViews) {}

  async stop(t: RecordTarget, caller: Principal) {
    const record = await this.views.stop(await resolveProject(this.views, caller, 'stop', t.id, t.project), t.id);
    if (!record) throw notFound('stop packet', t.id);
    assertVisible(caller, record.stop.project, 'stop packet', t.id);
    return record;
  }

  async handoff(t: RecordTarget, caller: Principal) {
    const view = await this.views.handoff(await resolveProject(this.views, caller, 'handoff', t.id, t.project), t.id);
    if (!view) throw notFound('handoff', t.id);
    assertVisible(caller, view.handoff.project, 'handoff', t.id);
    return view;
  }

  async run(t: RecordTarget, caller: Principal) {
    const project = await resolveProject(this.views, caller, 'run', t.id, t.project);
    const view = await this.views.run(project, t.id);
    if (!view) throw notFound('run', t.id);
    assertVisible(caller, view.run.project, 'run', t.id);
    return { ...view, handoffs: await this.views.runHandoffs(project, t.id) };
  }
}

@UseFilters(ApiExceptionFilter)
@UseGuards(ApiAuthGuard)
@Controller('v1/inbox')
export class InboxController {
  constructor(@Inject(BATON_VIEWS) private readonly views: BatonViews) {}

  /**
   * `GET /v1/inbox`: items a person must act on, newest or most urgent first, filtered, keyset-paged;
   * `open_count` is how many open items the filters other than `status` select.
   */
  @Get()
  async list(@Query() query: unknown, @Caller() caller: Principal) {
    const q = parseOr400(InboxQuerySchema, query);
    const projects = scopedProjects(caller, q.project);
    const filters: ItemFilters = {
      ...(projects ? { project: projects } : {}),
      ...(q.kind ? { kind: q.kind } : {}),
      ...(q.why ? { why: q.why } : {}),
      ...(q.agent ? { agent: q.agent } : {}),
      ...(q.priority ? { priority: q.priority } : {}),
      ...(q.status !== 'any' ? { status: q.status } : {}),
    };
    const [page, openCount] = await Promise.all([
      this.views.inbox({ filters, order: q.order, limit: q.limit, cursor: q.cursor ?? null }),
      this.views.inboxOpenCount(filters),
    ]);
    return { items: page.items, next_cursor: page.nextCursor, open_count: openCount };
  }
}

@UseFilters(ApiExceptionFilter)
@UseGuards(ApiAuthGuard)
@Controller('v1/stops')
export class StopsController {
  constructor(
    @Inject(BATON_VIEWS) private readonly views: BatonViews,
    private readonly actions: OperatorActions,
  ) {}

  /**
   * `GET /v1/stops`: stop packets, newest first, by why, run, agent, status, project and time
   * (`since` / `until`: the page starts at `until` and the listing ends at `since`).
   */
  @Get()
  async list(@Query() query: unknown, @Caller() caller: Principal) {
    const q = parseOr400(StopsQuerySchema, query);
    const projects = scopedProjects(caller, q.project);
    const filters: ItemFilters = {
      ...(projects ? { project: projects } : {}),
      ...(q.why ? { why: q.why } : {}),
      ...(q.agent ? { agent: q.agent } : {}),
      ...(q.status !== undefined && q.status !== 'any' ? { status: q.status } : {}),
    };
    const since = q.since ? isoMs(q.since) : null;
    const until = q.until ? isoMs(q.until) : null;
    // The window is sought inside Redis (pages start at `until`, end at `since`); a run's few packets are filtered here.
    const window = since !== null || until !== null ? { ...(since !== null ? { since } : {}), ...(until !== null ? { until } : {}) } : undefined;
    const page = await this.views.stops({ filters, ...(q.run ? { run: q.run } : {}), limit: q.limit, cursor: q.cursor ?? null, ...(window ? { window } : {}) });
    const inWindow = (created: string) => (since === null || isoMs(created) >= since) && (until === null || isoMs(created) <= until);
    const items = page.items.filter((r) => inWindow(r.stop.created_at));
    const last = page.items[page.items.length - 1];
    // Newest first: once a page reaches packets older than `since`, no later page can match.
    const exhausted = since !== null && last !== undefined && isoMs(last.stop.created_at) < since;
    return { items, next_cursor: exhausted ? null : page.nextCursor };
  }

  /** `GET /v1/stops/:id`: one stop packet with its answer and effect (the id must be unambiguous; else 409 `ambiguous_id`). */
  @NoQuery()
  @Get(':id')
  get(@Param('id') id: string, @Caller() caller: Principal) {
    return new RecordReads(this.views).stop(target(id), caller);
  }

  /**
   * `POST /v1/stops/:id/answer`: answer the packet's form → 200 applied / 409 refused (the router's
   * code) / 202 pending with `status_url` (id-only: 409 `ambiguous_id` when several projects hold it).
   */
  @NoQuery()
  @Post(':id/answer')
  answer(
    @Param('id') id: string,
    @Body() body: unknown,
    @Headers('content-type') type: string | undefined,
    @Caller() caller: Principal,
    @Res() res: HttpResponse,
  ) {
    return reply(res, this.actions.answerStop(target(id), actionBody(caller, StopAnswerBodySchema, formNumbers(type, body, STOP_ANSWER_NUMBERS)), caller));
  }
}

@UseFilters(ApiExceptionFilter)
@UseGuards(ApiAuthGuard)
@Controller('v1/handoffs')
export class HandoffsController {
  constructor(
    @Inject(BATON_VIEWS) private readonly views: BatonViews,
    private readonly actions: OperatorActions,
  ) {}

  /** `GET /v1/handoffs/:id`: the handoff record and its event timeline (id-only: 409 `ambiguous_id` when several projects hold it). */
  @NoQuery()
  @Get(':id')
  get(@Param('id') id: string, @Caller() caller: Principal) {
    return new RecordReads(this.views).handoff(target(id), caller);
  }

  /** `POST /v1/handoffs/:id/decision`: accept or rework a completion handback (through the ledger). */
  @NoQuery()
  @Post(':id/decision')
  @HttpCode(200)
  decide(@Param('id') id: string, @Body() body: unknown, @Caller() caller: Principal) {
    return this.actions.decideHandback(target(id), actionBody(caller, HandbackDecisionBodySchema, body), caller);
  }

  /** `POST /v1/handoffs/:id/abandon`: withdraw an open handoff (through the ledger, as the token's operator). */
  @NoQuery()
  @Post(':id/abandon')
  @HttpCode(200)
  abandon(@Param('id') id: string, @Body() body: unknown, @Caller() caller: Principal) {
    return this.actions.abandonHandoff(target(id), actionBody(caller, AbandonHandoffBodySchema, body), caller);
  }
}

/**
 * Handoff mesh runs by id alone (a convenience): answered when exactly one project the caller may
 * see holds the mesh id, 409 `ambiguous_id` when several do, 404 when none does.
 */
@UseFilters(ApiExceptionFilter)
@UseGuards(ApiAuthGuard)
@Controller('v1/meshes')
export class MeshesController {
  constructor(private readonly meshes: MeshReader) {}

  /** `GET /v1/meshes/:id`: the mesh run view (turns, handoffs taken, ignored calls and why, cap, outcome) and its timeline. */
  @NoQuery()
  @Get(':id')
  get(@Param('id') id: string, @Caller() caller: Principal) {
    const t = target(id);
    return this.meshes.get(caller, t.id, undefined);
  }
}

@UseFilters(ApiExceptionFilter)
@UseGuards(ApiAuthGuard)
@Controller('v1/runs')
export class RunsController {
  constructor(
    @Inject(BATON_VIEWS) private readonly views: BatonViews,
    private readonly actions: OperatorActions,
  ) {}

  /** `GET /v1/runs/:id`: the run view, its event timeline and the handoffs it created (id-only: 409 `ambiguous_id` when several projects hold it). */
  @NoQuery()
  @Get(':id')
  get(@Param('id') id: string, @Caller() caller: Principal) {
    return new RecordReads(this.views).run(target(id), caller);
  }

  /** `POST /v1/runs/:id/answer`: answer a held run → 200 applied / 409 refused / 202 pending. */
  @NoQuery()
  @Post(':id/answer')
  answer(@Param('id') id: string, @Body() body: unknown, @Caller() caller: Principal, @Res() res: HttpResponse) {
    return reply(res, this.actions.answerHold(target(id), actionBody(caller, HoldAnswerBodySchema, body), caller));
  }
}

/**
 * The project routes: runs, handoffs and stop packets addressed by project and id. A project the
 * token may not see answers 404 `not_found`, exactly as a record that does not exist.
 */
@UseFilters(ApiExceptionFilter)
@UseGuards(ApiAuthGuard)
@Controller('v1/projects/:project')
export class ProjectRecordsController {
  private readonly reads: RecordReads;

  constructor(
    @Inject(BATON_VIEWS) views: BatonViews,
    private readonly actions: OperatorActions,
    private readonly meshes: MeshReader,
    private readonly projects: ProjectControls,
    private readonly notices: NoticeRedelivery,
    private readonly webhooks: WebhookStatus,
  ) {
    this.reads = new RecordReads(views);
  }

  /**
   * `GET /v1/projects/:project/webhooks` (viewer+): the webhooks serving the project, each by id and
   * name, with what its deliveries of the project's notices did — last success, last failure and its
   * reason, failing since, dead-lettered notices. A project the token may not see is 404.
   */
  @NoQuery()
  @Get('webhooks')
  async listWebhooks(@Param('project') project: string, @Caller() caller: Principal) {
    const name = parseParam('project', ProjectParamSchema, project);
    assertVisible(caller, name, 'project', name);
    return { project: name, webhooks: await this.webhooks.ofProject(name) };
  }

  /**
   * `POST /v1/projects/:project/notices/:notice_id/redeliver` (operator, admin): send a human
   * action notice to the project's webhooks again — one whose delivery was given up on — skipping
   * those that already took it.
   */
  @NoQuery()
  @Post('notices/:notice_id/redeliver')
  @HttpCode(200)
  redeliverNotice(@Param('project') project: string, @Param('notice_id') noticeId: string, @Body() body: unknown, @Caller() caller: Principal) {
    actionBody(caller, NoticeRedeliverBodySchema, body ?? {}, 'redelivering a notice');
    return this.notices.redeliver(parseParam('project', ProjectParamSchema, project), parseParam('notice_id', IdParamSchema, noticeId), caller);
  }

  /** `GET /v1/projects/:project`: the project's published definition in short and its kill switch (active, or paused: by whom, since when, why). */
  @NoQuery()
  @Get()
  project(@Param('project') project: string, @Caller() caller: Principal) {
    return this.projects.summary(caller, parseParam('project', ProjectParamSchema, project));
  }

  /** `POST /v1/projects/:project/pause` (admin): the kill switch — no handoff of the project is offered or claimed until it is resumed. */
  @NoQuery()
  @Post('pause')
  @HttpCode(200)
  pause(@Param('project') project: string, @Body() body: unknown, @Caller() caller: Principal) {
    return this.projects.control(caller, parseParam('project', ProjectParamSchema, project), 'pause', () => parseOr400(PauseBodySchema, body));
  }

  /** `POST /v1/projects/:project/resume` (admin): dispatch again; every pending handoff is offered again. */
  @NoQuery()
  @Post('resume')
  @HttpCode(200)
  resume(@Param('project') project: string, @Body() body: unknown, @Caller() caller: Principal) {
    return this.projects.control(caller, parseParam('project', ProjectParamSchema, project), 'resume', () => parseOr400(ResumeBodySchema, body));
  }

  /**
   * `GET /v1/projects/:project/meshes/:id`: a handoff mesh run read from the events stream — its
   * turns, the handoffs taken, the calls ignored and why, the cap, the outcome — and its timeline.
   */
  @NoQuery()
  @Get('meshes/:id')
  mesh(@Param('project') project: string, @Param('id') id: string, @Caller() caller: Principal) {
    const t = target(id, project);
    return this.meshes.get(caller, t.id, t.project);
  }

  /** `GET /v1/projects/:project/runs/:id`: the run view, its event timeline and the handoffs it created. */
  @NoQuery()
  @Get('runs/:id')
  run(@Param('project') project: string, @Param('id') id: string, @Caller() caller: Principal) {
    return this.reads.run(target(id, project), caller);
  }

  /** `POST /v1/projects/:project/runs/:id/answer`: answer a held run → 200 applied / 409 refused / 202 pending. */
  @NoQuery()
  @Post('runs/:id/answer')
  answerHold(@Param('project') project: string, @Param('id') id: string, @Body() body: unknown, @Caller() caller: Principal, @Res() res: HttpResponse) {
    return reply(res, this.actions.answerHold(target(id, project), actionBody(caller, HoldAnswerBodySchema, body), caller));
  }

  /** `GET /v1/projects/:project/runs/:id/answers/:answer_id`: what became of an answer to the run (applied, refused with its code, pending). */
  @NoQuery()
  @Get('runs/:id/answers/:answer_id')
  runAnswer(@Param('project') project: string, @Param('id') id: string, @Param('answer_id') answerId: string, @Caller() caller: Principal) {
    const t = target(id, project);
    return this.actions.answerStatus({ project: t.project!, kind: 'run', id: t.id }, parseParam('answer_id', IdParamSchema, answerId), caller);
  }

  /** `GET /v1/projects/:project/meshes/:id/answers/:answer_id`: what became of an answer to a mesh's stop packet. */
  @NoQuery()
  @Get('meshes/:id/answers/:answer_id')
  meshAnswer(@Param('project') project: string, @Param('id') id: string, @Param('answer_id') answerId: string, @Caller() caller: Principal) {
    const t = target(id, project);
    return this.actions.answerStatus({ project: t.project!, kind: 'mesh', id: t.id }, parseParam('answer_id', IdParamSchema, answerId), caller);
  }

  /** `GET /v1/projects/:project/handoffs/:id`: the handoff record and its event timeline. */
  @NoQuery()
  @Get('handoffs/:id')
  handoff(@Param('project') project: string, @Param('id') id: string, @Caller() caller: Principal) {
    return this.reads.handoff(target(id, project), caller);
  }

  /** `POST /v1/projects/:project/handoffs/:id/decision`: accept or rework a completion handback. */
  @NoQuery()
  @Post('handoffs/:id/decision')
  @HttpCode(200)
  decide(@Param('project') project: string, @Param('id') id: string, @Body() body: unknown, @Caller() caller: Principal) {
    return this.actions.decideHandback(target(id, project), actionBody(caller, HandbackDecisionBodySchema, body), caller);
  }

  /** `POST /v1/projects/:project/handoffs/:id/abandon`: withdraw an open handoff; the run waiting on it sees `handoff_abandoned`. */
  @NoQuery()
  @Post('handoffs/:id/abandon')
  @HttpCode(200)
  abandon(@Param('project') project: string, @Param('id') id: string, @Body() body: unknown, @Caller() caller: Principal) {
    return this.actions.abandonHandoff(target(id, project), actionBody(caller, AbandonHandoffBodySchema, body), caller);
  }

  /** `GET /v1/projects/:project/stops/:id`: one stop packet with its answer and effect. */
  @NoQuery()
  @Get('stops/:id')
  stop(@Param('project') project: string, @Param('id') id: string, @Caller() caller: Principal) {
    return this.reads.stop(target(id, project), caller);
  }

  /** `POST /v1/projects/:project/stops/:id/answer`: answer the packet's form → 200 applied / 409 refused / 202 pending. */
  @NoQuery()
  @Post('stops/:id/answer')
  answerStop(
    @Param('project') project: string,
    @Param('id') id: string,
    @Body() body: unknown,
    @Headers('content-type') type: string | undefined,
    @Caller() caller: Principal,
    @Res() res: HttpResponse,
  ) {
    return reply(
      res,
      this.actions.answerStop(target(id, project), actionBody(caller, StopAnswerBodySchema, formNumbers(type, body, STOP_ANSWER_NUMBERS)), caller),
    );
  }
}

@UseFilters(ApiExceptionFilter)
@Controller()
export class DocsController {
  private document: object | null = null;

  /** `GET /openapi.json`: the OpenAPI 3.1 document of this API, built from its zod schemas. */
  @Get('openapi.json')
  openapi() {
    this.document ??= buildOpenApiDocument();
    return this.document;
  }

  /** `GET /docs`: a minimal page linking the document. */
  @Get('docs')
  @Header('Content-Type', 'text/html; charset=utf-8')
  docs() {
    return docsPage();
  }
}
