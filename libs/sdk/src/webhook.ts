import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Signed webhooks. Baton's notifier POSTs each human action notice (the JSON body, exactly the
 * notice published on `<prefix>.notice.<project>`) to every configured webhook with:
 * - `Baton-Timestamp`: the signing time, Unix seconds;
 * - `Baton-Signature`: `v1=<hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>` (several
 *   comma-separated `v1=` values may appear while a secret is rotated; any match verifies);
 * - `Baton-Notice-Id`: the notice id;
 * - `Baton-Project`: the notice's project.
 * Verify against the RAW body bytes, before parsing JSON. Deliveries are at least once: dedupe on
 * the pair (project, notice id), never on the notice id alone — notice ids are derived from ids
 * agents and clients choose (result ids...), so two projects can emit notices of the same id
 * (see {@link webhookDedupeKey} and {@link noticeDedupeKey}).
 */
export const WebhookHeaders = {
  signature: 'Baton-Signature',
  timestamp: 'Baton-Timestamp',
  noticeId: 'Baton-Notice-Id',
  project: 'Baton-Project',
} as const;

/** Why a webhook request failed verification. */
export const WebhookRefusal = {
  missingSignature: 'missing_signature',
  missingTimestamp: 'missing_timestamp',
  malformedTimestamp: 'malformed_timestamp',
  timestampOutOfTolerance: 'timestamp_out_of_tolerance',
  signatureMismatch: 'signature_mismatch',
} as const;
export type WebhookRefusal = (typeof WebhookRefusal)[keyof typeof WebhookRefusal];

export type WebhookVerification = { ok: true; timestamp: number } | { ok: false; reason: WebhookRefusal };

/** Request headers as Node (`IncomingHttpHeaders`), fetch (`Headers`) or a plain object give them. */
export type WebhookRequestHeaders = { get(name: string): string | null } | Record<string, string | string[] | undefined>;

export interface VerifyWebhookOptions {
  /** Largest accepted distance between the timestamp and now, in seconds (default 300). */
  toleranceSec?: number;
  /** Now, in Unix seconds (default: the clock). Tests pass a fixed value. */
  nowSec?: number;
}

const toBuffer = (body: string | Uint8Array) =>
  typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body.buffer, body.byteOffset, body.byteLength);

/** The HMAC-SHA256 (hex) of `"<timestamp>.<body>"` under `secret`. */
function digest(body: string | Uint8Array, secret: string, timestampSec: number): string {
  return createHmac('sha256', secret).update(`${timestampSec}.`).update(toBuffer(body)).digest('hex');
}

/**
 * The `Baton-Signature` value for `body` signed at `timestampSec` (`v1=<hex>`). The notifier signs
 * with it; receivers normally only need {@link verifyWebhookSignature}.
 */
export function signWebhookPayload(body: string | Uint8Array, secret: string, timestampSec: number): string {
  return `v1=${digest(body, secret, timestampSec)}`;
}

function header(headers: WebhookRequestHeaders, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') {
    const value = (headers as { get(name: string): string | null }).get(name);
    return value === null ? undefined : value;
  }
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (key.toLowerCase() !== wanted || value === undefined) continue;
    return Array.isArray(value) ? value.join(',') : value;
  }
  return undefined;
}

/**
 * The key a receiver dedupes a human action notice on: `<project>:<notice_id>`. A notice id is
 * unique only within its project (two projects' results of one id give notices of one id), so the
 * key holds both; a project key never holds `:`, so the first `:` ends the project. Takes the
 * notice itself: a webhook's parsed body or a message of `<prefix>.notice.<project>`.
 */
export function noticeDedupeKey(notice: { project: string; notice_id: string }): string {
  return `${notice.project}:${notice.notice_id}`;
}

/**
 * The dedupe key (`<project>:<notice_id>`, see {@link noticeDedupeKey}) of a webhook delivery or a
 * NATS notice message, from its `Baton-Project` and `Baton-Notice-Id` headers; null when either is
 * missing (a notifier older than the `Baton-Project` header: use {@link noticeDedupeKey} on the
 * body). The headers are not signed: call it after {@link verifyWebhookSignature}, which covers the
 * body, or prefer the body's own `project` and `notice_id`.
 */
export function webhookDedupeKey(headers: WebhookRequestHeaders): string | null {
  const project = header(headers, WebhookHeaders.project)?.trim();
  const noticeId = header(headers, WebhookHeaders.noticeId)?.trim();
  return project && noticeId ? noticeDedupeKey({ project, notice_id: noticeId }) : null;
}

/**
 * Verify a Baton webhook request: the `Baton-Timestamp` must be within `toleranceSec` (default
 * 300 s) of now — a replayed old request fails — and one `v1=` signature in `Baton-Signature`
 * must equal HMAC-SHA256(secret, `"<timestamp>.<body>"`), compared in constant time. `body` is
 * the raw request body (string or bytes) as received. Never throws: returns `{ ok: true,
 * timestamp }` or `{ ok: false, reason }`.
 */
export function verifyWebhookSignature(
  body: string | Uint8Array,
  headers: WebhookRequestHeaders,
  secret: string,
  options: VerifyWebhookOptions = {},
): WebhookVerification {
  const signature = header(headers, WebhookHeaders.signature);
  if (!signature) return { ok: false, reason: WebhookRefusal.missingSignature };
  const rawTimestamp = header(headers, WebhookHeaders.timestamp);
  if (!rawTimestamp) return { ok: false, reason: WebhookRefusal.missingTimestamp };
  if (!/^\d{1,12}$/.test(rawTimestamp.trim())) return { ok: false, reason: WebhookRefusal.malformedTimestamp };
  const timestamp = Number(rawTimestamp.trim());
  const now = options.nowSec ?? Math.floor(Date.now() / 1000);
  const tolerance = options.toleranceSec ?? 300;
  if (Math.abs(now - timestamp) > tolerance) return { ok: false, reason: WebhookRefusal.timestampOutOfTolerance };
  const expected = Buffer.from(digest(body, secret, timestamp), 'hex');
  const candidates = signature
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part.startsWith('v1='))
    .map((part) => part.slice(3));
  for (const candidate of candidates) {
    if (!/^[0-9a-f]{64}$/i.test(candidate)) continue;
    const actual = Buffer.from(candidate, 'hex');
    if (actual.length === expected.length && timingSafeEqual(actual, expected)) return { ok: true, timestamp };
  }
  return { ok: false, reason: WebhookRefusal.signatureMismatch };
}
