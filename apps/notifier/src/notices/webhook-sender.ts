import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { HumanActionNotice } from '@baton/contracts';
import { projectRef, RedisLock } from '@baton/projections';
import { signWebhookPayload, WebhookHeaders } from '@baton/sdk';
import type { WebhookTarget } from '../notifier.config';

/** How long a delivered notice is remembered per webhook (so replays and redeliveries skip it). */
export const DELIVERED_TTL_SEC = 30 * 24 * 3600;

/**
 * Why a call of a webhook failed, each a stable code (docs/errors.md, "webhook failure reasons"),
 * and the error codes of Node's fetch (the `cause` of its `TypeError: fetch failed`) each stands
 * for. `tls_failed` also takes every certificate and TLS code (`CERT_*`, `*_CERT_*`, `ERR_TLS_*`,
 * `ERR_SSL_*`); `request_failed` is anything else, its text saying what.
 */
export const WEBHOOK_FAILURE_REASONS = [
  /** The webhook answered, with a status outside 2xx (a redirect too: never followed). */
  { code: 'http_status', causes: [] },
  { code: 'connection_refused', causes: ['ECONNREFUSED'] },
  /** The connection was reset or closed before the answer came (`other side closed`). */
  { code: 'connection_reset', causes: ['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED'] },
  { code: 'dns_failed', causes: ['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NODATA', 'EAI_NONAME'] },
  { code: 'network_unreachable', causes: ['EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'ENETDOWN', 'EADDRNOTAVAIL'] },
  { code: 'tls_failed', causes: ['EPROTO', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'CERT_HAS_EXPIRED'] },
  /** No answer within NOTIFIER_WEBHOOK_TIMEOUT_MS, or the connection could not be made in time. */
  { code: 'timeout', causes: ['ETIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'] },
  { code: 'request_failed', causes: [] },
] as const;
/** Why a call of a webhook failed ({@link WEBHOOK_FAILURE_REASONS}). */
export type WebhookFailureReason = (typeof WEBHOOK_FAILURE_REASONS)[number]['code'];

/** One webhook that did not take the notice: why (a stable code), what happened (text), and the status it answered. */
export interface DeliveryFailure {
  /** The webhook's id ({@link targetId}). */
  target: string;
  reason: WebhookFailureReason;
  /** What happened, for a person: `HTTP 503`, `connect ECONNREFUSED 10.0.0.7:443`, `read ECONNRESET`… */
  error: string;
  /** `http_status`: the status the webhook answered. */
  status?: number;
}

/** What one delivery pass did, per webhook (by target id). */
export interface DeliveryReport {
  delivered: string[];
  /** Already delivered earlier (deduplicated by project and notice id). */
  skipped: string[];
  /** Being delivered by another sender right now (the consumer, another notifier, a redelivery): not called twice at once. */
  busy: string[];
  failed: DeliveryFailure[];
}

/**
 * One failure as a log line or a letter's detail says it: `<name> [<id>] (<reason>: <text>)`, or
 * `<id> (<reason>: <text>)` without the webhook's name (`WebhookNames` in webhook-names.ts gives it).
 */
export function failureText(failure: DeliveryFailure, name?: string): string {
  return `${name === undefined ? failure.target : `${name} [${failure.target}]`} (${failure.reason}: ${failure.error})`;
}

const REASON_OF_CAUSE = new Map<string, WebhookFailureReason>(
  WEBHOOK_FAILURE_REASONS.flatMap(({ code, causes }) => causes.map((cause) => [cause, code] as const)),
);
/** The codes of a certificate or TLS failure not listed by name (OpenSSL's verify codes, Node's TLS codes). */
const TLS_CODE = /(^|_)CERT(_|$)|^ERR_(TLS|SSL)_|^ERR_OSSL_|^HOSTNAME_MISMATCH$/;
/** How long a failure's text may be (an OpenSSL message can run on). */
const FAILURE_TEXT_CHARS = 300;

interface ErrorLike {
  name?: unknown;
  message?: unknown;
  code?: unknown;
  cause?: unknown;
  errors?: unknown;
}

/** `error` and what lies under it: its `cause` chain and, for an AggregateError (several addresses tried), its first error. */
function errorChain(error: unknown): ErrorLike[] {
  const chain: ErrorLike[] = [];
  for (let at: unknown = error; typeof at === 'object' && at !== null && chain.length < 6; ) {
    const e = at as ErrorLike;
    chain.push(e);
    at = e.cause ?? (Array.isArray(e.errors) ? (e.errors as unknown[])[0] : undefined);
  }
  return chain;
}

const oneLine = (text: string) => {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > FAILURE_TEXT_CHARS ? `${line.slice(0, FAILURE_TEXT_CHARS - 1)}…` : line;
};

/**
 * Why a call that threw failed: Node's fetch throws `TypeError: fetch failed` for every network
 * failure, the cause (`ECONNREFUSED`, `UND_ERR_SOCKET`, a certificate code…) in its `cause`; the
 * timeout of the call's AbortSignal is a `TimeoutError`. The reason is read from the first code in
 * the chain, the text from the error that carries it.
 */
export function failureOf(error: unknown, timeoutMs: number): { reason: WebhookFailureReason; error: string } {
  const chain = errorChain(error);
  if (chain.some((e) => e.name === 'TimeoutError')) return { reason: 'timeout', error: `no answer within ${timeoutMs} ms (NOTIFIER_WEBHOOK_TIMEOUT_MS)` };
  const coded = chain.find((e) => typeof e.code === 'string' && e.code !== '');
  if (coded !== undefined) {
    const code = coded.code as string;
    const message = typeof coded.message === 'string' ? coded.message : '';
    const reason = REASON_OF_CAUSE.get(code) ?? (TLS_CODE.test(code) ? 'tls_failed' : 'request_failed');
    return { reason, error: oneLine(message.includes(code) ? message : message === '' ? code : `${code}: ${message}`) };
  }
  const last = chain.at(-1);
  const text =
    last === undefined
      ? String(error)
      : chain.map((e) => (typeof e.message === 'string' ? `${typeof e.name === 'string' ? `${e.name}: ` : ''}${e.message}` : String(e))).join(': ');
  return { reason: 'request_failed', error: oneLine(text) };
}

/** A webhook's stable id: a hash of its URL (never the secret); it keys the dedupe records. */
export function targetId(target: Pick<WebhookTarget, 'url'>): string {
  return createHash('sha256').update(target.url).digest('hex').slice(0, 16);
}

export interface WebhookSenderOptions {
  targets: readonly WebhookTarget[];
  redis: Redis;
  /** The deployment prefix (dedupe keys are `<prefix>:webhooks:delivered:<target>:<project>:<notice_id>`). */
  prefix: string;
  timeoutMs: number;
  /** Clock in Unix seconds (tests). */
  nowSec?: () => number;
}

/**
 * Sends one human action notice to every webhook whose `projects` include the notice's project.
 * The body is the notice JSON; headers carry `Baton-Timestamp`, `Baton-Signature` (HMAC-SHA256
 * over `"<timestamp>.<body>"`, see @baton/sdk `verifyWebhookSignature`), `Baton-Notice-Id`,
 * `Baton-Project` and `Baton-Delivery-Attempt`. Deduplicated by project and notice id (notice ids
 * are derived from cause ids, which repeat across projects): a webhook that answered 2xx is
 * recorded in Redis and never called again for that project's notice. Does not retry by itself:
 * it reports failures and the caller (the durable consumer) retries with backoff.
 */
export class WebhookSender {
  private readonly nowSec: () => number;

  constructor(private readonly options: WebhookSenderOptions) {
    this.nowSec = options.nowSec ?? (() => Math.floor(Date.now() / 1000));
  }

  /** The webhooks a notice of `project` goes to. */
  targetsFor(project: string): WebhookTarget[] {
    return this.options.targets.filter((t) => t.projects === undefined || t.projects.includes(project));
  }

  /**
   * The delivery mark of one project's notice at one webhook: `<prefix>:webhooks:delivered:<target>:<project>:<notice_id>`,
   * the project ref last (see `projectRef`). The marks of earlier versions
   * (`<prefix>:webhooks:sent:<target>:<notice_id>`, no project) are not read: they cannot say
   * which project's notice was delivered, so honouring one would skip another project's notice
   * of the same id; they expire on their own (DELIVERED_TTL_SEC).
   */
  private deliveredKey(target: WebhookTarget, notice: Pick<HumanActionNotice, 'project' | 'notice_id'>): string {
    return `${this.options.prefix}:webhooks:delivered:${targetId(target)}:${projectRef(notice.project, notice.notice_id)}`;
  }

  /**
   * Deliver `notice` to each of its webhooks not yet delivered; never throws for a failing webhook.
   * A webhook is called by one sender at a time for one notice: each call holds a lease in Redis
   * (`…:sending`, a {@link RedisLock} of a few seconds past the timeout, renewed while the call runs
   * and released only by its holder), and a sender that finds it held reports the webhook `busy`
   * instead of calling it too — two notifiers, or the consumer and an operator's redelivery, never
   * send one notice to one webhook twice at once.
   */
  async deliver(notice: HumanActionNotice, attempt: number): Promise<DeliveryReport> {
    const report: DeliveryReport = { delivered: [], skipped: [], busy: [], failed: [] };
    const body = JSON.stringify(notice);
    await Promise.all(
      this.targetsFor(notice.project).map(async (target) => {
        const id = targetId(target);
        const key = this.deliveredKey(target, notice);
        if ((await this.options.redis.exists(key)) === 1) {
          report.skipped.push(id);
          return;
        }
        const lock = new RedisLock(this.options.redis, `${key}:sending`, { ttlMs: this.options.timeoutMs + 5_000 });
        const attempted = await lock.tryRun(async () => {
          // Delivered by the sender that held the lock just before: nothing to send.
          if ((await this.options.redis.exists(key)) === 1) {
            report.skipped.push(id);
            return;
          }
          await this.send(target, notice, body, attempt, key, report);
        });
        if (!attempted.acquired) report.busy.push(id);
      }),
    );
    return report;
  }

  /** One POST of the notice to one webhook, recorded in `report`; the delivery mark on a 2xx. */
  private async send(target: WebhookTarget, notice: HumanActionNotice, body: string, attempt: number, key: string, report: DeliveryReport): Promise<void> {
    const id = targetId(target);
    const timestamp = this.nowSec();
    try {
      const response = await fetch(target.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'baton-notifier',
          [WebhookHeaders.timestamp]: String(timestamp),
          [WebhookHeaders.signature]: signWebhookPayload(body, target.secret, timestamp),
          [WebhookHeaders.noticeId]: notice.notice_id,
          [WebhookHeaders.project]: notice.project,
          'Baton-Delivery-Attempt': String(attempt),
        },
        body,
        redirect: 'manual',
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
      await response.arrayBuffer().catch(() => undefined);
      if (response.status < 200 || response.status >= 300) {
        report.failed.push({ target: id, reason: 'http_status', error: `HTTP ${response.status}`, status: response.status });
        return;
      }
      await this.options.redis.set(key, String(timestamp), 'EX', DELIVERED_TTL_SEC);
      report.delivered.push(id);
    } catch (error) {
      report.failed.push({ target: id, ...failureOf(error, this.options.timeoutMs) });
    }
  }
}
