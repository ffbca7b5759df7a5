import { randomUUID } from 'node:crypto';
import { type HandoffRecord, type NextForm, type NextFormField, type StopPacket } from '@baton/contracts';
import { InboxWhys, type InboxItem, type StopRecord } from '@baton/projections';
import { canAnswer } from '../auth/roles';
import type { FailingWebhook } from '../notices/webhook-status';
import { csrfField, hidden, NOTE_MAX, page, type PageContext } from './layout';
import { html, prettyJson, seg, type SafeHtml } from './html';

/** An inbox item with what its card shows: the stop packet of a stop, the handoff of a handback or escalation. */
export type ItemDetails =
  | { kind: 'stop'; item: InboxItem; record: StopRecord | null }
  | { kind: 'hold'; item: InboxItem }
  | { kind: 'handback'; item: InboxItem; handoff: HandoffRecord | null }
  | { kind: 'escalation'; item: InboxItem; handoff: HandoffRecord | null };

/** The filters of the inbox page (already validated), as the form shows them. */
export interface InboxFilterValues {
  project?: string;
  why?: string;
  agent?: string;
  priority?: string;
  status: string;
  kind?: string;
}

/** The inbox's whys, as the API takes them (a stop's why, a hold's kind, an escalation's cause). */
const WHYS = InboxWhys;
const PRIORITIES = ['urgent', 'high', 'medium', 'low'];
const STATUSES = ['open', 'answered', 'closed', 'any'];
const KINDS = ['stop', 'hold', 'handback', 'escalation'];

const str = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

function select(name: string, label: string, options: readonly string[], selected: string | undefined, anyLabel: string | null): SafeHtml {
  return html`<label>${label}<select name="${name}">${anyLabel !== null ? html`<option value="">${anyLabel}</option>` : null}${options.map(
    (o) => html`<option value="${o}"${o === selected ? html` selected` : null}>${o}</option>`,
  )}</select></label>`;
}

function filtersForm(filters: InboxFilterValues, ctx: PageContext): SafeHtml {
  const p = ctx.principal;
  const projects = p && p.role !== 'admin' && p.projects !== '*' ? p.projects : null;
  return html`<form class="filters" method="get" action="/inbox" data-testid="filters">
  ${projects ? select('project', 'project', projects, filters.project, 'all mine') : html`<label>project<input name="project" value="${filters.project ?? ''}" size="12"></label>`}
  ${select('why', 'why', WHYS, filters.why, 'any')}
  <label>agent<input name="agent" value="${filters.agent ?? ''}" size="12"></label>
  ${select('priority', 'priority', PRIORITIES, filters.priority, 'any')}
  ${select('status', 'status', STATUSES, filters.status, null)}
  ${select('kind', 'kind', KINDS, filters.kind, 'any')}
  <button class="btn" type="submit">Filter</button>
</form>`;
}

function badges(item: InboxItem): SafeHtml {
  return html`<div class="badges">
  <span class="badge" data-testid="kind">${item.kind}</span>
  ${item.why ? html`<span class="badge" data-testid="why">why: ${item.why}</span>` : null}
  ${item.agent ? html`<span class="badge">agent: ${item.agent}</span>` : null}
  ${item.priority ? html`<span class="badge ${item.priority}">${item.priority}</span>` : null}
  <span class="badge">project: ${item.project}</span>
  <span class="badge" data-testid="status">${item.status}${item.resolution ? html` · ${item.resolution}` : null}${item.closed_by ? html` by ${item.closed_by}` : null}</span>
  <span class="badge muted">opened ${item.opened_at}</span>
</div>`;
}

/** The web page of a run, handoff or mesh run of one project (`/projects/<project>/runs/<id>`...). */
export const recordHref = (kind: 'runs' | 'handoffs' | 'meshes', project: string, id: string): string => `/projects/${seg(project)}/${kind}/${seg(id)}`;

const runLink = (project: string, workflowRunId: string | undefined, text: string): SafeHtml =>
  workflowRunId ? html`<a href="${recordHref('runs', project, workflowRunId)}#timeline">${text}</a>` : html`${text}`;

/** A link to a mesh run's page (a mesh's stop items). */
const meshLink = (project: string, meshRunId: string, text: string, testId?: string): SafeHtml =>
  html`<a href="${recordHref('meshes', project, meshRunId)}"${testId ? html` data-testid="${testId}"` : null}>${text}</a>`;

/**
 * The hold a hold form answers: its inbox item's cause, sent back as `hold_cause` so a form rendered
 * for an earlier hold is refused (`stale_answer`) rather than answering a newer one. Items projected
 * before holds carried their cause send none.
 */
function holdCauseFields(item: InboxItem): SafeHtml {
  const cause = item['cause'] as { kind?: unknown; id?: unknown } | undefined;
  if (typeof cause?.kind !== 'string' || typeof cause.id !== 'string') return html``;
  return html`${hidden('hold_cause_kind', cause.kind)}${hidden('hold_cause_id', cause.id)}`;
}

/** What a number field's answer must be, in words (above the current cap; whole; at most N), or nothing. */
function capLimits(field: NextFormField): SafeHtml | null {
  const rules = [
    ...(field.greater_than !== undefined ? [`above ${field.greater_than}`] : []),
    ...(field.whole ? ['a whole number'] : []),
    ...(field.at_most !== undefined ? [`at most ${field.at_most}`] : []),
  ];
  return rules.length > 0 ? html`<div class="muted" data-testid="field-limits">${rules.join(', ')}</div>` : null;
}

/**
 * The least a number field takes, as the browser checks it (`min` is inclusive): the next whole
 * number above `greater_than` for a whole-number field; else `greater_than` itself (the answer's
 * own check refuses the equal value, in words).
 */
function numberMin(field: NextFormField): number {
  const above = field.greater_than ?? 0;
  return field.whole ? Math.floor(above) + 1 : above;
}

/**
 * The actions that read a form's fields (Route reads the kind of request, Raise cap the new cap):
 * only they have the browser check the fields; Deny, Close, Stop or Approve send without them.
 */
const FIELD_ACTIONS: ReadonlySet<string> = new Set(['intent', 'raise_cap']);

/** The `next_form` of a stop packet as a real form: its fields, then one submit button per action. */
function stopForm(packet: StopPacket, form: NextForm | null, ctx: PageContext, returnTo: string): SafeHtml {
  const digest = form?.pending_digest ?? packet.pending_digest;
  const fields = form?.fields ?? [];
  const actions = form?.actions ?? [{ id: 'acknowledge' as const, label: 'Acknowledge', style: 'primary' as const }];
  return html`<form class="answer" method="post" action="/inbox/projects/${seg(packet.project)}/stops/${seg(packet.packet_id)}/answer" data-testid="stop-form">
  ${csrfField(ctx)}${hidden('answer_id', `web-${randomUUID()}`)}${hidden('pending_digest', digest)}${hidden('return', returnTo)}
  ${form ? html`<div class="muted">${form.prompt}</div>` : null}
  ${fields.map((field) => {
    switch (field.kind) {
      case 'display':
        return html`<div class="field"><span>${field.label}</span><pre>${field.value === undefined ? '' : String(field.value)}</pre></div>`;
      case 'text':
        return html`<label class="field">${field.label}<input name="${field.id}"${field.required ? html` required data-required="true"` : null} value="${field.value === undefined ? '' : String(field.value)}" maxlength="128"></label>`;
      case 'select':
        return html`<label class="field">${field.label}<select name="${field.id}"${field.required ? html` required` : null}><option value="">${field.required ? 'Choose…' : ''}</option>${(field.options ?? []).map((o) => html`<option value="${o}">${o}</option>`)}</select></label>`;
      case 'number':
        return html`<label class="field">${field.label}<input type="number" step="${field.whole ? '1' : 'any'}" name="${field.id}"${field.required ? html` required` : null} value="${field.value === undefined ? '' : String(field.value)}"${field.greater_than !== undefined ? html` data-greater-than="${field.greater_than}" min="${numberMin(field)}"` : null}${field.at_most !== undefined ? html` max="${field.at_most}"` : null}></label>${capLimits(field)}`;
      case 'note':
        return html`<label class="field">${field.label}<textarea name="note" maxlength="${NOTE_MAX}"></textarea></label>`;
      default:
        return html``;
    }
  })}
  ${fields.some((f) => f.kind === 'note') ? null : html`<label class="field">Note (optional)<textarea name="note" maxlength="${NOTE_MAX}"></textarea></label>`}
  <div class="actions">${actions.map((a) => html`<button class="btn ${a.style}" type="submit" name="action" value="${a.id}"${FIELD_ACTIONS.has(a.id) ? null : html` formnovalidate`}>${a.label}</button>`)}</div>
</form>`;
}

function stopCard(details: Extract<ItemDetails, { kind: 'stop' }>, ctx: PageContext, returnTo: string): SafeHtml {
  const { item, record } = details;
  const packet = record?.stop;
  const open = item.status === 'open' && packet?.status === 'open';
  // A handoff mesh's stop: its tried entries and its record link go to the mesh run's page.
  const meshRunId = record?.mesh_run_id ?? (typeof item['mesh_run_id'] === 'string' ? item['mesh_run_id'] : undefined);
  const triedLink = (name: string) =>
    meshRunId !== undefined ? meshLink(item.project, meshRunId, name) : runLink(packet!.project, packet!.workflow_run_id, name);
  return html`<dl class="facts">
  <dt>User message</dt><dd data-testid="user-msg">${packet?.user_msg ?? String(item['user_msg'] ?? '')}</dd>
  <dt>Why</dt><dd>${packet?.why ?? item.why ?? ''}${packet?.detail ? html` — ${packet.detail}` : null}</dd>
  <dt>What was tried</dt><dd data-testid="tried">${
    packet && packet.tried.length > 0 ? packet.tried.map((name, i) => html`${i > 0 ? ', ' : ''}${triedLink(name)}`) : html`<span class="muted">nothing</span>`
  }${packet && packet.trace_ids.length > 0 ? html` <span class="muted">(traces: ${packet.trace_ids.join(', ')})</span>` : null} · ${
    meshRunId !== undefined ? meshLink(item.project, meshRunId, 'mesh run', 'mesh-link') : runLink(item.project, item.workflow_run_id, 'run timeline')
  }</dd>
  <dt>Frozen pending call</dt><dd data-testid="pending">${packet?.pending ? html`<pre>${prettyJson(packet.pending)}</pre>` : html`<span class="muted">none</span>`}</dd>
  ${packet?.cap ? html`<dt>Cap</dt><dd>${packet.cap.name}: limit ${packet.cap.limit}${packet.cap.used !== undefined ? html`, used ${packet.cap.used}` : null}</dd>` : null}
  ${packet?.answer ? html`<dt>Answer</dt><dd>${packet.answer.action} by ${packet.answer.answered_by} at ${packet.answer.answered_at}${packet.answer.note ? html` — ${packet.answer.note}` : null}</dd>` : null}
</dl>
${open && packet && ctx.principal && canAnswer(ctx.principal) ? stopForm(packet, packet.next_form, ctx, returnTo) : readOnly(ctx, open)}`;
}

function readOnly(ctx: PageContext, open: boolean): SafeHtml | null {
  if (!open) return null;
  return ctx.principal && !canAnswer(ctx.principal) ? html`<p class="muted">Read only: your ${ctx.principal.role} token cannot answer.</p>` : null;
}

function holdCard(item: InboxItem, ctx: PageContext, returnTo: string): SafeHtml {
  const target = item['pending_target'] as { agent?: string; step?: string } | null | undefined;
  const open = item.status === 'open';
  return html`<dl class="facts">
  <dt>Hold</dt><dd>${str(item['hold_kind']) ?? 'hold'} at step ${str(item['step']) ?? '?'}</dd>
  <dt>Reason</dt><dd data-testid="user-msg">${str(item['reason']) ?? ''}</dd>
  <dt>Continue goes to</dt><dd>${target ? `${target.agent ?? '?'} (${target.step ?? '?'})` : html`<span class="muted">no pending target: at a terminal step Continue completes the run; elsewhere it is refused (reroute or terminate)</span>`}</dd>
  ${item['pending_call'] ? html`<dt>Pending call</dt><dd data-testid="pending">${html`<pre>${prettyJson(item['pending_call'])}</pre>`}<span class="muted">left pending by the agent before the hold; ${target ? 'Continue or Reroute hands' : 'Reroute hands'} it on (not approved), Terminate drops it</span></dd>` : null}
  <dt>Run</dt><dd>${runLink(item.project, item.workflow_run_id, item.workflow_run_id ?? '')}</dd>
</dl>
${
  open && item.workflow_run_id && ctx.principal && canAnswer(ctx.principal)
    ? html`<form class="answer" method="post" action="/inbox/projects/${seg(item.project)}/runs/${seg(item.workflow_run_id)}/answer" data-testid="hold-form">
  ${csrfField(ctx)}${hidden('answer_id', `web-${randomUUID()}`)}${hidden('return', returnTo)}${holdCauseFields(item)}
  <label class="field">Reroute to (step, agent or role; only for Reroute)<input name="target" maxlength="128"></label>
  <label class="field">Note (optional)<textarea name="note" maxlength="${NOTE_MAX}"></textarea></label>
  <div class="actions"><button class="btn primary" type="submit" name="action" value="continue">Continue</button><button class="btn" type="submit" name="action" value="reroute">Reroute</button><button class="btn danger" type="submit" name="action" value="terminate">Terminate</button></div>
</form>`
    : readOnly(ctx, open)
}`;
}

function handoffFacts(item: InboxItem, handoff: HandoffRecord | null): SafeHtml {
  return html`<dl class="facts">
  <dt>Summary</dt><dd data-testid="user-msg">${handoff?.summary ?? item.title}</dd>
  <dt>From → to</dt><dd>${handoff?.from_agent ?? ''} → ${handoff?.to_agent ?? handoff?.to_role ?? str(item['to_agent']) ?? ''}</dd>
  <dt>Handoff</dt><dd>${item.handoff_id ? html`<a href="${recordHref('handoffs', item.project, item.handoff_id)}">${item.handoff_id}</a>` : ''} ${handoff ? html`<span class="muted">(${handoff.status})</span>` : null}</dd>
  ${item.workflow_run_id ? html`<dt>Run</dt><dd>${runLink(handoff?.source_project ?? item.project, item.workflow_run_id, item.workflow_run_id)}</dd>` : null}
  ${str(item['offer_given_up_by']) ? html`<dt>Offer given up</dt><dd data-testid="offer-given-up">by ${str(item['offer_given_up_by'])}: ${str(item['offer_given_up_reason']) ?? ''}</dd>` : null}
</dl>`;
}

function handbackCard(details: Extract<ItemDetails, { kind: 'handback' }>, ctx: PageContext, returnTo: string): SafeHtml {
  const { item, handoff } = details;
  const open = item.status === 'open';
  return html`${handoffFacts(item, handoff)}
${
  open && item.handoff_id && ctx.principal && canAnswer(ctx.principal)
    ? html`<form class="answer" method="post" action="/inbox/projects/${seg(item.project)}/handoffs/${seg(item.handoff_id)}/decision" data-testid="handback-form">
  ${csrfField(ctx)}${hidden('idempotency_key', `web-${randomUUID()}`)}${hidden('return', returnTo)}
  <label class="field">Note (required for Rework)<textarea name="note" maxlength="${NOTE_MAX}"></textarea></label>
  <div class="actions"><button class="btn primary" type="submit" name="decision" value="accept">Accept</button><button class="btn" type="submit" name="decision" value="rework">Rework</button></div>
</form>`
    : readOnly(ctx, open)
}`;
}

/** One inbox item as an `<article>` card (also served alone as the live-update fragment). */
/**
 * The webhooks failing now for the session's projects, one line each: its name and id, the project,
 * since when, its last failure's reason and text, the notices it never took — nothing when none
 * fails. The whole status is `GET /v1/projects/<project>/webhooks`.
 */
export function failingWebhooksSection(failing: readonly FailingWebhook[]): SafeHtml | null {
  if (failing.length === 0) return null;
  return html`<section class="banner error webhooks" role="status" data-testid="failing-webhooks" aria-label="Failing webhooks">
<strong>Webhooks failing</strong> — notices are not reaching them (retried for about an hour, then dead-lettered; once fixed, <code>baton notice redeliver</code> sends a dead-lettered one again):
<ul>${failing.map(({ project, status }) => {
    const last = status.last_failure;
    return html`<li data-testid="failing-webhook" data-webhook-id="${status.id}" data-project="${project}"><strong>${status.name}</strong> <span class="muted">[${status.id}]</span> · project ${project} · failing since <time datetime="${status.failing_since ?? ''}">${status.failing_since ?? ''}</time>${
      last ? html` · last: <code>${last.reason}</code> ${last.error}` : null
    }${status.dead_lettered > 0 ? html` · ${status.dead_lettered} dead-lettered` : null} · <span class="muted">GET /v1/projects/${project}/webhooks</span></li>`;
  })}</ul>
</section>`;
}

export function itemCard(details: ItemDetails, ctx: PageContext, returnTo: string): SafeHtml {
  const { item } = details;
  let body: SafeHtml;
  switch (details.kind) {
    case 'stop':
      body = stopCard(details, ctx, returnTo);
      break;
    case 'hold':
      body = holdCard(item, ctx, returnTo);
      break;
    case 'handback':
      body = handbackCard(details, ctx, returnTo);
      break;
    case 'escalation':
      body = html`${handoffFacts(item, details.handoff)}<p class="muted">An escalation is taken over through the ledger (claim the consult handoff, or baton handoff ${item.handoff_id ?? ''}).</p>`;
      break;
    default:
      body = html``;
  }
  // What became of the item (who answered it, when, how) rides on the card: the live script tells
  // an operator typing in an item someone else answered.
  return html`<article class="item" data-item-id="${item.id}" data-status="${item.status}" data-kind="${item.kind}"${
    item.resolution ? html` data-resolution="${item.resolution}"` : null
  }${item.closed_by ? html` data-closed-by="${item.closed_by}"` : null}${item.closed_at ? html` data-closed-at="${item.closed_at}"` : null}>
  <h2 data-testid="title">${item.title}</h2>
  ${badges(item)}
  ${body}
</article>`;
}

/**
 * The inbox page: filters, a flash or refusal banner, the live status and the item cards.
 * `query` is this page's own (filters, page size and cursor): the live script reconciles the list
 * with `/inbox/ids` of the same query, so a later page stays that page; `firstPage` is the query
 * of the first page (filters and page size), which the "More…" link extends with the next cursor.
 */
export function inboxPage(input: {
  ctx: PageContext;
  filters: InboxFilterValues;
  query: string;
  firstPage: string;
  /** This page follows a cursor (it is not the first page). */
  later: boolean;
  items: ItemDetails[];
  nextCursor: string | null;
  /** How many open items the filters other than `status` select (the inbox's size, not the page's). */
  openCount: number;
  /** The webhooks failing now for the projects this session sees (a small section; none: no section). */
  failingWebhooks?: readonly FailingWebhook[];
  sent?: string;
  /** What became of the answer `sent` names: applied by the router, or published and not decided yet. */
  outcome?: 'applied' | 'pending';
  error?: { code: string; message: string };
}): string {
  const { ctx, filters, query, firstPage, items } = input;
  const returnTo = `/inbox${query}`;
  const more = input.nextCursor ? `/inbox${firstPage}${firstPage ? '&' : '?'}cursor=${encodeURIComponent(input.nextCursor)}` : null;
  const body = html`<div class="inbox-head"><h1>Inbox <span class="muted" data-testid="shown">(<span id="open-count" data-testid="open-count">${input.openCount}</span> open; <span id="item-count">${items.length}</span> shown${input.later ? ' on this page' : null}${
    more ? html`<span id="more-note">; more on the next page</span>` : null
  })</span></h1>
<span id="live-status" class="live" role="status" aria-live="polite" data-state="connecting">connecting</span></div>
${filtersForm(filters, ctx)}
${
  input.sent
    ? input.outcome === 'applied'
      ? html`<div class="banner ok" role="status" tabindex="-1" autofocus data-testid="sent" data-outcome="applied">Answer to ${input.sent} applied.</div>`
      : html`<div class="banner ok" role="status" tabindex="-1" autofocus data-testid="sent" data-outcome="pending">Answer to ${input.sent} sent; not applied yet. The item leaves the inbox when the run takes it.</div>`
    : null
}
${input.error ? html`<div class="banner error" role="alert" tabindex="-1" data-testid="refused">Refused (${input.error.code}): ${input.error.message}</div>` : null}
${failingWebhooksSection(input.failingWebhooks ?? [])}
<div id="live-notice"></div>
${input.later ? html`<p><a href="/inbox${firstPage}" data-testid="first-page">← First page</a></p>` : null}
<section id="items" tabindex="-1" aria-label="Items" data-query="${query}">
${items.map((details) => itemCard(details, ctx, returnTo))}
</section>
<p id="empty" class="muted"${items.length > 0 ? html` hidden` : null}>Nothing to act on${input.later ? ' on this page' : null}.</p>
${more ? html`<p><a href="${more}" data-testid="more">More…</a></p>` : null}`;
  return page('Inbox', ctx, body, { script: true, skipTo: { href: '#items', label: 'Skip to the items' } });
}
