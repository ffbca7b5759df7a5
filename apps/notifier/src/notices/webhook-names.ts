import { redactUrl } from '@baton/platform';
import type { WebhookTarget } from '../notifier.config';
import { failureText, targetId, type DeliveryFailure } from './webhook-sender';

/** The longest name derived from a URL (longer ones are cut, ending in `…`). */
const DERIVED_NAME_CHARS = 80;

/**
 * A path segment that may be a secret, shown as `***`: 16 characters or more, or 8 or more with a
 * digit or with both upper- and lower-case letters. Chat tools put their webhook's secret in the
 * path (`/services/T0…/B0…/<24 characters>`, `/api/webhooks/<id>/<token>`), so only short words
 * (`hooks`, `baton`, `v1`, `incoming`) are shown.
 */
function secretLike(segment: string): boolean {
  return segment.length >= 16 || (segment.length >= 8 && (/\d/.test(segment) || (/[a-z]/.test(segment) && /[A-Z]/.test(segment))));
}

/**
 * The name of a webhook that has none configured, derived from its URL: host (and port) and path,
 * without the user and password (`redactUrl`), the query and the fragment, each path segment that
 * may be a secret shown as `***` — `chat.example/hooks/baton`, `hooks.slack.com/services/***\/***\/***`.
 * Readable, never a secret; a `name` in the configuration says more.
 */
export function derivedWebhookName(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(redactUrl(url));
  } catch {
    return 'webhook';
  }
  const segments = parsed.pathname
    .split('/')
    .filter((segment) => segment !== '')
    .map((segment) => (secretLike(segment) ? '***' : segment));
  const name = [parsed.host, ...segments].join('/');
  return name.length <= DERIVED_NAME_CHARS ? name : `${name.slice(0, DERIVED_NAME_CHARS - 1)}…`;
}

/** One configured webhook as an operator names it: its id (the key of its records) and its name. */
export interface NamedWebhook {
  /** The first 16 hex digits of the SHA-256 of its URL ({@link targetId}): what keys its delivery marks and status. */
  id: string;
  /** Its configured `name`, or one derived from its URL ({@link derivedWebhookName}). */
  name: string;
}

/** A failed delivery with the webhook's name beside its id. */
export type NamedDeliveryFailure = DeliveryFailure & { name: string };

/**
 * The operator-facing names of the configured webhooks (NOTIFIER_WEBHOOKS). A webhook's `name` is
 * its own (the configuration refuses two of one name); one without is named from its URL, and when
 * two derive the same name (one host and path, two queries) each gets `~<first 6 hex of its id>`.
 * The id stays the key of everything stored (delivery marks, status, dead letters' detail); the
 * name is shown beside it: `<name> [<id>]`.
 */
export class WebhookNames {
  private readonly byId = new Map<string, string>();

  constructor(targets: readonly Pick<WebhookTarget, 'url' | 'name'>[]) {
    const entries = targets.map((target) => ({ id: targetId(target), given: target.name, derived: derivedWebhookName(target.url) }));
    const taken = new Map<string, Set<string>>();
    for (const { id, given, derived } of entries) {
      const name = given ?? derived;
      taken.set(name, (taken.get(name) ?? new Set()).add(id));
    }
    for (const { id, given, derived } of entries) {
      if (this.byId.has(id)) continue;
      this.byId.set(id, given ?? ((taken.get(derived)?.size ?? 0) > 1 ? `${derived}~${id.slice(0, 6)}` : derived));
    }
  }

  /** The name of the webhook of id `id` (the id itself for one this notifier is not configured with). */
  of(id: string): string {
    return this.byId.get(id) ?? id;
  }

  /** Whether a webhook of this id is configured here. */
  has(id: string): boolean {
    return this.byId.has(id);
  }

  /** `<name> [<id>]`: how a log line, a letter's detail or a message names one webhook. */
  label(id: string): string {
    const name = this.byId.get(id);
    return name === undefined ? id : `${name} [${id}]`;
  }

  /** `{ <id>: <name> }` of the given ids (a reply's `webhook_names`). */
  namesOf(ids: Iterable<string>): Record<string, string> {
    const out: Record<string, string> = {};
    for (const id of ids) Object.defineProperty(out, id, { value: this.of(id), enumerable: true, writable: true, configurable: true });
    return out;
  }

  /** Every configured webhook, in configuration order (one entry per id). */
  list(): NamedWebhook[] {
    return [...this.byId].map(([id, name]) => ({ id, name }));
  }

  /** `failure` with its webhook's name. */
  named(failure: DeliveryFailure): NamedDeliveryFailure {
    return { ...failure, name: this.of(failure.target) };
  }

  /** One failure in words: `<name> [<id>] (<reason>: <text>)`. */
  failureText(failure: DeliveryFailure): string {
    return failureText(failure, this.byId.get(failure.target));
  }
}
