import type { HandoffRecord } from '@baton/contracts';
import type { ProjectRef, RunView, StopRecord, TimelineEntry } from '@baton/projections';
import { html, prettyJson, type SafeHtml } from './html';
import { recordHref } from './inbox-page';
import { page, type PageContext } from './layout';

function timelineTable(entries: readonly TimelineEntry[]): SafeHtml {
  return html`<table class="timeline" id="timeline" data-testid="timeline">
<thead><tr><th>#</th><th>When</th><th>Event</th><th>Decided by</th><th>Origin</th><th>What happened</th></tr></thead>
<tbody>
${entries.map(
  (e) =>
    html`<tr data-event-type="${e.type}"><td>${e.seq}</td><td>${e.occurred_at}</td><td>${e.type}</td><td>${e.actor}</td><td>${e.origin}</td><td>${e.summary}${
      e.said !== undefined ? html`<pre class="said" data-testid="said">${e.said}</pre>` : null
    }</td></tr>`,
)}
</tbody></table>`;
}

/**
 * A run's timeline page: the run's state, its stop packets with their answers, the handoffs it
 * created, then every event in stream order with who or what decided it and its origin.
 */
export function runPage(input: { ctx: PageContext; run: RunView; timeline: TimelineEntry[]; stops: StopRecord[]; handoffs: ProjectRef[] }): string {
  const { run, timeline, stops, handoffs } = input;
  const body = html`<h1>Run <span data-testid="run-id">${run.workflow_run_id}</span></h1>
<p><a href="/inbox">← Inbox</a></p>
<dl class="facts">
  <dt>Project</dt><dd>${run.project}</dd>
  <dt>Workflow</dt><dd>${run.workflow.name} v${run.workflow.version}</dd>
  <dt>Status</dt><dd data-testid="run-status">${run.status}${run.terminated_reason ? html` — ${run.terminated_reason}` : null}</dd>
  <dt>Step / agent</dt><dd>${run.step} / ${run.agent}</dd>
  <dt>Hops</dt><dd>${run.hops}</dd>
  ${run.hold ? html`<dt>Hold</dt><dd>${run.hold.kind}: ${run.hold.reason}</dd>` : null}
  <dt>Started</dt><dd>${run.started_at}</dd>
</dl>
<h2>Stop packets</h2>
${
  stops.length === 0
    ? html`<p class="muted">none</p>`
    : html`<table class="timeline"><thead><tr><th>Packet</th><th>Why</th><th>Tried</th><th>Pending call</th><th>Status</th><th>Answer</th></tr></thead><tbody>
${stops.map(
  (r) => html`<tr><td>${r.stop.packet_id}</td><td>${r.stop.why}</td><td>${r.stop.tried.join(', ')}</td><td>${r.stop.pending ? html`<pre>${prettyJson(r.stop.pending)}</pre>` : 'none'}</td><td>${r.stop.status}</td><td>${
    r.stop.answer ? html`${r.stop.answer.action} by ${r.stop.answer.answered_by}${r.effect ? html` → ${r.effect.kind}` : null}` : '-'
  }</td></tr>`,
)}</tbody></table>`
}
<h2>Handoffs</h2>
${
  handoffs.length === 0
    ? html`<p class="muted">none</p>`
    : html`<ul>${handoffs.map((h) => html`<li><a href="${recordHref('handoffs', h.project, h.id)}">${h.id}</a>${h.project !== run.project ? html` <span class="muted">(project ${h.project})</span>` : null}</li>`)}</ul>`
}
<h2>Timeline</h2>
${timelineTable(timeline)}`;
  return page(`Run ${run.workflow_run_id}`, input.ctx, body);
}

/** A handoff's page: the record and its event timeline. */
export function handoffPage(input: { ctx: PageContext; handoff: HandoffRecord; timeline: TimelineEntry[] }): string {
  const { handoff, timeline } = input;
  const body = html`<h1>Handoff ${handoff.id}</h1>
<p><a href="/inbox">← Inbox</a>${handoff.workflow_run_id ? html` · <a href="${recordHref('runs', handoff.source_project ?? handoff.project, handoff.workflow_run_id)}">run ${handoff.workflow_run_id}</a>` : null}</p>
<dl class="facts">
  <dt>Project</dt><dd>${handoff.project}</dd>
  <dt>Kind / status</dt><dd>${handoff.kind} / ${handoff.status}</dd>
  <dt>Priority</dt><dd>${handoff.priority}</dd>
  <dt>From → to</dt><dd>${handoff.from_agent} → ${handoff.to_agent ?? handoff.to_role ?? ''}</dd>
  <dt>Summary</dt><dd>${handoff.summary}</dd>
</dl>
<h2>Timeline</h2>
${timelineTable(timeline)}`;
  return page(`Handoff ${handoff.id}`, input.ctx, body);
}

/** The login page: paste a token (made with `baton token create`). */
export function loginPage(input: { csrf: string; next: string; error?: string }): string {
  const body = html`<div class="login">
<h1>Sign in</h1>
<p class="muted">Paste your operator token (an admin makes one with <code>baton token create</code>).</p>
${input.error ? html`<div class="banner error" role="alert" data-testid="login-error">${input.error}</div>` : null}
<form method="post" action="/login" data-testid="login-form">
  <input type="hidden" name="_csrf" value="${input.csrf}">
  <input type="hidden" name="next" value="${input.next}">
  <label class="field">Token<br><input type="password" name="token" autocomplete="off" required></label>
  <p><button class="btn primary" type="submit">Sign in</button></p>
</form></div>`;
  return page('Sign in', { principal: null, csrf: null }, body);
}

/** A refusal or error page (answers the status it describes). */
export function errorPage(ctx: PageContext, input: { status: number; code: string; message: string; back?: string }): string {
  const body = html`<h1>${input.status === 404 ? 'Not found' : 'Refused'}</h1>
<div class="banner error" role="alert" data-testid="refused"><strong>${input.code}</strong>: ${input.message}</div>
<p><a href="${input.back ?? '/inbox'}">← Back to the inbox</a></p>`;
  return page(input.status === 404 ? 'Not found' : 'Refused', ctx, body);
}
