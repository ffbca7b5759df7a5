import { randomUUID } from 'node:crypto';
import type { HandoffRecord } from '@baton/contracts';
import { handoverText, turnCount, type MeshView } from '@baton/domain';
import { OPEN_HANDOFF_STATUSES, type ProjectRef, type RunView, type StopRecord, type TimelineEntry } from '@baton/projections';
import { canAnswer } from '../auth/roles';
import { html, prettyJson, type SafeHtml } from './html';
import { recordHref } from './inbox-page';
import { csrfField, hidden, NOTE_MAX, page, type PageContext } from './layout';

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

/** Variables as a two-column table (values as JSON), or "none". */
function variablesTable(vars: Record<string, unknown>, testId: string): SafeHtml {
  const names = Object.keys(vars);
  if (names.length === 0) return html`<p class="muted" data-testid="${testId}">none</p>`;
  return html`<table class="timeline" data-testid="${testId}"><thead><tr><th>Variable</th><th>Value</th></tr></thead><tbody>
${names.map((name) => html`<tr><td>${name}</td><td><code>${JSON.stringify(vars[name])}</code></td></tr>`)}</tbody></table>`;
}

/** A run's returnable-handoff stack, its routes (rule and reason) and its variables, declared apart from implicit. */
function runDetails(run: RunView): SafeHtml {
  return html`${
    run.waiting_parents.length > 0 || run.pending_handoff
      ? html`<h2>Waiting parents</h2>
${
  run.waiting_parents.length === 0
    ? html`<p class="muted">none</p>`
    : html`<table class="timeline" data-testid="waiting-parents"><thead><tr><th>Parent (return address)</th><th>Step</th><th>Waits for</th><th>Handoff</th><th>Since</th><th>On return</th><th>The child's scope</th></tr></thead><tbody>
${run.waiting_parents.map(
  (p) =>
    html`<tr data-testid="waiting-parent"><td>${p.agent}</td><td>${p.step}</td><td>${p.child}</td><td>${p.handoff_id}</td><td>${p.since}</td><td>${p.on_return ? html`${p.on_return.action}${p.on_return.handler ? html` (${p.on_return.handler})` : null}` : 'default'}</td><td><code>${JSON.stringify(p.child_variables)}</code></td></tr>`,
)}</tbody></table>`
}
${run.pending_handoff ? html`<p data-testid="pending-handoff">Handoff ${run.pending_handoff.handoff_id} from ${run.pending_handoff.from} to ${run.pending_handoff.to} (${run.pending_handoff.return_expected ? 'returnable' : 'permanent'}) has not run yet.</p>` : null}`
      : null
  }
<h2>Routes</h2>
${
  run.routes.length === 0
    ? html`<p class="muted">none</p>`
    : html`<table class="timeline" data-testid="routes"><thead><tr><th>#</th><th>Outcome</th><th>From</th><th>To</th><th>Rule</th><th>Reason</th><th>Decided by</th></tr></thead><tbody>
${run.routes.map(
  (r) =>
    html`<tr data-testid="route" data-rule="${r.rule}"><td>${r.seq}</td><td>${r.outcome}</td><td>${r.from ? r.from.agent : 'start'}</td><td>${r.to ? html`${r.to.agent} <span class="muted">(${r.to.step})</span>` : '-'}</td><td>${r.rule}${
      r.handoff ? html` <span class="muted">(${r.handoff.return_expected ? 'returnable' : 'permanent'}, route ${r.handoff.route})</span>` : null
    }</td><td>${r.reason ?? html`<span class="muted">no reason given</span>`}</td><td>${r.origin}</td></tr>`,
)}</tbody></table>`
}
<h2>Variables</h2>
${
  run.declared_variables === null || run.implicit_variables === null
    ? html`<p class="muted">This run started before declarations were recorded: all its variables together.</p>${variablesTable(run.variables, 'variables')}`
    : html`<h3>Declared</h3>
<p class="muted">Declared in an agent's MEMORY or GATHER.${run.unset_declared_variables && run.unset_declared_variables.length > 0 ? html` Not set yet: ${run.unset_declared_variables.join(', ')}.` : null}</p>
${variablesTable(run.declared_variables, 'declared-variables')}
<h3>Implicit</h3>
<p class="muted">Set without a declaration: the start's input, start variables, values no agent declares.</p>
${variablesTable(run.implicit_variables, 'implicit-variables')}`
}`;
}

/**
 * A run's timeline page: the run's state, its stop packets with their answers, the handoffs it
 * created, the waiting parents, its routes (rule and reason) and variables (declared apart from
 * implicit), then every event in stream order with who or what decided it and its origin.
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
  ${run.awaiting_input ? html`<dt>Waiting for</dt><dd>the customer's next message${run.queued_messages > 0 ? html` (${run.queued_messages} queued)` : null}</dd>` : null}
  <dt>Started</dt><dd>${run.started_at}</dd>
</dl>
<h2>Stop packets</h2>
${
  stops.length === 0
    ? html`<p class="muted">none</p>`
    : html`<table class="timeline"><thead><tr><th>Packet</th><th>Why</th><th>Tried</th><th>Pending call</th><th>Status</th><th>Answer</th></tr></thead><tbody>
${stops.map(
  (r) =>
    html`<tr><td>${r.stop.packet_id}</td><td>${r.stop.why}</td><td>${r.stop.tried.join(', ')}</td><td>${r.stop.pending ? html`<pre>${prettyJson(r.stop.pending)}</pre>` : 'none'}</td><td>${r.stop.status}</td><td>${
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
${runDetails(run)}
<h2>Timeline</h2>
${timelineTable(timeline)}`;
  return page(`Run ${run.workflow_run_id}`, input.ctx, body);
}

/** One line saying how a mesh run ended (or that it runs). */
function meshOutcome(mesh: MeshView): SafeHtml {
  const o = mesh.outcome;
  switch (o.status) {
    case 'completed':
      return html`completed by ${o.by} after ${turnCount(o.turns)}${o.output ? html`; output from ${o.output.agent} (turn ${o.output.turn}):<pre class="said" data-testid="mesh-output">${o.output.text}</pre>` : html` <span class="muted">(no output agent spoke)</span>`}`;
    case 'stopped':
      return o.at_cap
        ? html`stopped at its cap: packet <a href="#stop">${o.packet_id}</a> waits for an operator`
        : html`stopped (${o.why}): packet <a href="#stop">${o.packet_id}</a> waits for an operator`;
    case 'terminated':
      return html`terminated by an operator: ${o.reason}`;
    default:
      return html`running: ${mesh.speaker} speaks next`;
  }
}

/**
 * A handoff mesh run's page (issue 14), read from the events stream: the outcome, the cap, every
 * turn with what its agent said and the handoff calls it made, the handoffs taken, the calls
 * ignored and why, refused turns, the stop, and the timeline.
 */
export function meshPage(input: { ctx: PageContext; mesh: MeshView; timeline: TimelineEntry[] }): string {
  const { mesh, timeline } = input;
  const cap = mesh.cap;
  const body = html`<h1>Mesh run <span data-testid="mesh-id">${mesh.mesh_run_id}</span></h1>
<p><a href="/inbox">← Inbox</a></p>
<dl class="facts">
  <dt>Project</dt><dd>${mesh.project}</dd>
  <dt>Mesh</dt><dd>${mesh.mesh.name} <span class="muted">(entry ${mesh.mesh.entry}; outputs ${mesh.mesh.outputs.length > 0 ? mesh.mesh.outputs.join(', ') : 'every agent'})</span></dd>
  <dt>Status</dt><dd data-testid="mesh-status">${mesh.status}</dd>
  <dt>Outcome</dt><dd data-testid="mesh-outcome">${meshOutcome(mesh)}</dd>
  <dt>Cap</dt><dd data-testid="mesh-cap">${cap.used} of ${cap.max_iterations} turns used${
    cap.raised.length > 0
      ? html` <span class="muted">(raised ${cap.raised.map((r, i) => html`${i > 0 ? ', ' : ''}${r.from} → ${r.to} by ${r.by}`)})</span>`
      : null
  }</dd>
  <dt>Started</dt><dd>${mesh.started_at}${mesh.started_by ? html` by ${mesh.started_by}` : null}</dd>
  ${mesh.input !== null ? html`<dt>Input</dt><dd>${mesh.input}</dd>` : null}
</dl>
<h2>Turns</h2>
${
  mesh.turns.length === 0
    ? html`<p class="muted">none yet</p>`
    : html`<table class="timeline" data-testid="mesh-turns"><thead><tr><th>Turn</th><th>Agent</th><th>What it said</th><th>Handoff calls</th><th>When</th></tr></thead><tbody>
${mesh.turns.map((t) => html`<tr data-testid="mesh-turn"><td>${t.turn}</td><td>${t.agent}</td><td><pre class="said">${t.text}</pre></td><td>${t.stopped !== undefined ? html`${t.calls.join(', ')} <span class="muted">stopped (${t.stopped.why})${t.calls.length > 0 ? '; not followed' : ''}</span>` : t.calls.length > 0 ? t.calls.join(', ') : html`<span class="muted">none (ends the mesh)</span>`}</td><td>${t.at}</td></tr>`)}</tbody></table>`
}
<h2>Handoffs taken</h2>
${
  mesh.handoffs.length === 0
    ? html`<p class="muted">none</p>`
    : html`<table class="timeline" data-testid="mesh-handoffs"><thead><tr><th>Turn</th><th>From</th><th>To</th><th>Tool</th><th>Handoff</th><th>Handover</th></tr></thead><tbody>
${mesh.handoffs.map((h) => html`<tr data-testid="mesh-handoff"><td>${h.turn}</td><td>${h.from}</td><td>${h.to}</td><td>${h.tool}${h.after_cap_raise ? html` <span class="muted">(after the cap was raised)</span>` : null}</td><td>${h.handoff_id}</td><td data-testid="mesh-handover">${handoverText(h.handover)}</td></tr>`)}</tbody></table>`
}
<h2>Calls ignored</h2>
${
  mesh.ignored.length === 0
    ? html`<p class="muted" data-testid="mesh-ignored">none</p>`
    : html`<table class="timeline" data-testid="mesh-ignored"><thead><tr><th>Turn</th><th>Agent</th><th>Tool</th><th>Why</th><th>Detail</th></tr></thead><tbody>
${mesh.ignored.map((i) => html`<tr data-testid="mesh-ignored-call" data-reason="${i.reason}"><td>${i.turn ?? ''}</td><td>${i.agent}</td><td>${i.tool}</td><td>${i.reason}</td><td>${i.detail}</td></tr>`)}</tbody></table>`
}
${
  mesh.rejected.length === 0
    ? null
    : html`<h2>Refused</h2><table class="timeline" data-testid="mesh-rejected"><thead><tr><th>Result</th><th>Agent</th><th>Code</th><th>Message</th></tr></thead><tbody>
${mesh.rejected.map((r) => html`<tr><td>${r.result_id}</td><td>${r.agent}</td><td>${r.code}</td><td>${r.message}</td></tr>`)}</tbody></table>`
}
${
  mesh.stop === null
    ? null
    : html`<h2 id="stop">Stop</h2>
<dl class="facts" data-testid="mesh-stop">
  <dt>Packet</dt><dd>${mesh.stop.packet_id} (${mesh.stop.why}) — ${mesh.stop.status}</dd>
  ${mesh.stop.refused ? html`<dt>Refused handoff</dt><dd>${mesh.stop.refused.from} → ${mesh.stop.refused.to} (${mesh.stop.refused.tool})</dd>` : null}
  ${mesh.stop.detail ? html`<dt>Detail</dt><dd>${mesh.stop.detail}</dd>` : null}
  ${mesh.stop.answer ? html`<dt>Answer</dt><dd>${mesh.stop.answer.action} by ${mesh.stop.answer.by} at ${mesh.stop.answer.at} → ${mesh.stop.answer.effect}</dd>` : null}
</dl>`
}
<h2>Timeline</h2>
${timelineTable(timeline)}`;
  return page(`Mesh run ${mesh.mesh_run_id}`, input.ctx, body);
}

/**
 * Withdraw (abandon) a handoff that is still open, saying why: for a principal who may act (as the
 * inbox's answer forms are), posted back to this page. A fresh idempotency key per render makes a
 * resubmitted form a retry, never a second abandon.
 */
function abandonForm(handoff: HandoffRecord, ctx: PageContext): SafeHtml | null {
  const open = (OPEN_HANDOFF_STATUSES as readonly string[]).includes(handoff.status);
  if (!open || !ctx.principal || !canAnswer(ctx.principal)) return null;
  const here = recordHref('handoffs', handoff.project, handoff.id);
  return html`<h2>Withdraw this handoff</h2>
<form class="answer" method="post" action="${here}/abandon" data-testid="abandon-form">
  ${csrfField(ctx)}${hidden('idempotency_key', `web-${randomUUID()}`)}${hidden('return', here)}
  <label class="field">Reason (required; recorded with the abandon)<textarea name="reason" maxlength="${NOTE_MAX}" required></textarea></label>
  <div class="actions"><button class="btn danger" type="submit">Withdraw</button></div>
</form>`;
}

/**
 * A handoff's page: the record, the Withdraw form while it is open, and its event timeline.
 * `withdrawn`: this session's own Withdraw form redirected here (signed; see the controller).
 */
export function handoffPage(input: { ctx: PageContext; handoff: HandoffRecord; timeline: TimelineEntry[]; withdrawn?: boolean }): string {
  const { handoff, timeline } = input;
  const body = html`<h1>Handoff ${handoff.id}</h1>
<p><a href="/inbox">← Inbox</a>${handoff.workflow_run_id ? html` · <a href="${recordHref('runs', handoff.source_project ?? handoff.project, handoff.workflow_run_id)}">run ${handoff.workflow_run_id}</a>` : null}</p>
${input.withdrawn ? html`<div class="banner ok" data-testid="sent" data-outcome="applied">Handoff ${handoff.id} withdrawn (abandoned).</div>` : null}
<dl class="facts">
  <dt>Project</dt><dd>${handoff.project}</dd>
  <dt>Kind / status</dt><dd>${handoff.kind} / ${handoff.status}</dd>
  <dt>Priority</dt><dd>${handoff.priority}</dd>
  <dt>From → to</dt><dd>${handoff.from_agent} → ${handoff.to_agent ?? handoff.to_role ?? ''}</dd>
  <dt>Summary</dt><dd>${handoff.summary}</dd>
</dl>
${abandonForm(handoff, input.ctx)}
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
  <label class="field">Token<br><input type="password" name="token" autocomplete="off" required autofocus></label>
  <p><button class="btn primary" type="submit">Sign in</button></p>
</form></div>`;
  return page('Sign in', { principal: null, csrf: null }, body);
}

/**
 * A refusal or error page (answers the status it describes): the stable code, then what it means
 * in plain words; the API's own wording, when it differs, under "Details". `signIn`: the session
 * ended, so the page links to the sign-in page, which comes back to `signIn` (a local path).
 */
export function errorPage(
  ctx: PageContext,
  input: { status: number; code: string; message: string; detail?: string; back?: string; signIn?: string; retry?: string },
): string {
  const title = input.status === 404 ? 'Not found' : input.status === 503 ? 'Try again shortly' : 'Refused';
  const body = html`<h1>${title}</h1>
<div class="banner error" role="alert" data-testid="refused" tabindex="-1"><strong>${input.code}</strong>: ${input.message}${
    input.detail !== undefined && input.detail !== input.message
      ? html`<details class="detail"><summary>Details</summary><code data-testid="refusal-detail">${input.detail}</code></details>`
      : null
  }</div>
${
  input.signIn !== undefined
    ? html`<p><a class="btn primary" href="/login?next=${encodeURIComponent(input.signIn)}" data-testid="sign-in">Sign in again</a> <span class="muted">then answer again: the inbox puts back what you typed in this tab.</span></p>`
    : null
}
${input.retry !== undefined ? html`<p><a class="btn primary" href="${input.retry}" data-testid="try-again">Try again</a></p>` : null}
<p><a href="${input.back ?? '/inbox'}">← Back${input.back === undefined || input.back.startsWith('/inbox') ? ' to the inbox' : null}</a></p>`;
  return page(title, ctx, body);
}
