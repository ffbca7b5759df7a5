import { Limits } from '@baton/contracts';
import type { Principal } from '../auth/roles';
import { html, type SafeHtml } from './html';

/** Who is looking at a page and the CSRF token their forms carry (null on the login page). */
export interface PageContext {
  principal: Principal | null;
  csrf: string | null;
}

/**
 * Security headers of every page: a Content-Security-Policy that allows scripts, styles and
 * connections from this origin only (no inline script can run), no framing, no referrer to other sites, no caching.
 */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Type': 'text/html; charset=utf-8',
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'same-origin',
  'Cache-Control': 'no-store',
};

/** The hidden CSRF field every form posts. */
export function csrfField(ctx: PageContext): SafeHtml {
  return html`<input type="hidden" name="_csrf" value="${ctx.csrf ?? ''}">`;
}

/** A hidden form field (nothing when there is no value). */
export function hidden(name: string, value: string | null | undefined): SafeHtml {
  return value === null || value === undefined ? html`` : html`<input type="hidden" name="${name}" value="${value}">`;
}

/** A note's length as every answer and decision schema takes it (`ShortTextSchema`); an abandon's reason too. */
export const NOTE_MAX = Limits.maxShortText;

function who(ctx: PageContext): SafeHtml {
  const p = ctx.principal;
  if (!p) return html``;
  const projects = p.role === 'admin' || p.projects === '*' ? 'all projects' : `projects ${p.projects.join(', ')}`;
  return html`<span class="who" data-testid="who">${p.name} · ${p.role} · ${projects}
    <form method="post" action="/logout">${csrfField(ctx)}<button type="submit">Sign out</button></form></span>`;
}

/**
 * A whole page: the shell around `body`. `script` loads the live-inbox script; `skipTo` puts a
 * "skip to" link first on the page (shown when focused), for keyboard and screen-reader users.
 */
export function page(title: string, ctx: PageContext, body: SafeHtml, options: { script?: boolean; skipTo?: { href: string; label: string } } = {}): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · Baton</title>
<link rel="stylesheet" href="/assets/baton.css">
${options.script ? html`<script src="/assets/inbox.js" defer></script>` : null}
</head>
<body>
${options.skipTo ? html`<a class="skip" href="${options.skipTo.href}" data-testid="skip-link">${options.skipTo.label}</a>` : null}
<header class="top"><a href="/inbox">Baton operator inbox</a>${who(ctx)}</header>
<main>
${body}
</main>
</body>
</html>
`.value;
}
