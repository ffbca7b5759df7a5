import { Inject, Injectable } from '@nestjs/common';
import type { Redis } from 'ioredis';
import type { HumanActionNotice } from '@baton/contracts';
import { LuaScript, parseProjectRef, projectRef } from '@baton/projections';
import { RUNTIME, type ServiceConfig, type ServiceRuntime } from '@baton/platform';
import { NOTIFIER_CONFIG, type NotifierConfig, type WebhookTarget } from '../notifier.config';
import { WebhookNames } from './webhook-names';
import { targetId, WEBHOOK_FAILURE_REASONS, type DeliveryReport, type WebhookFailureReason } from './webhook-sender';

/** How long a webhook's status for one project is kept after its last write (a webhook removed from the configuration fades). */
export const WEBHOOK_STATUS_TTL_SEC = 90 * 24 * 3600;

/** A delivery as the status records it. */
type Outcome = { kind: 'ok' } | { kind: 'failed'; reason: WebhookFailureReason; error: string; status?: number } | { kind: 'dead' };

/**
 * Records one outcome of one webhook for one project, keeping the newest of each kind whatever
 * order concurrent deliveries report in. KEYS: the status hash, the failing index (a sorted set of
 * `<project>:<id>` by failing-since). ARGV: kind (`ok`, `failed`, `dead`), time (epoch ms), the
 * index member, notice id, reason, error text, HTTP status ('' for none), TTL (seconds).
 * - `ok`: the last success; `failing_since` (and the index member) cleared unless a failure newer
 *   than this success was recorded.
 * - `failed`: the last failure; `failing_since` set to it when none is set and no newer success was.
 * - `dead`: the dead-lettered count, and the last dead letter.
 */
const RECORD = new LuaScript(
  'webhook-status',
  `
local kind, at, member = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local function num(field) return tonumber(redis.call('HGET', KEYS[1], field) or '0') or 0 end
if kind == 'ok' then
  if at >= num('success_at') then redis.call('HSET', KEYS[1], 'success_at', at, 'success_notice', ARGV[4]) end
  if redis.call('HEXISTS', KEYS[1], 'failing_since') == 1 and num('failure_at') <= at then
    redis.call('HDEL', KEYS[1], 'failing_since')
    redis.call('ZREM', KEYS[2], member)
  end
elseif kind == 'failed' then
  if at >= num('failure_at') then
    redis.call('HSET', KEYS[1], 'failure_at', at, 'failure_notice', ARGV[4], 'failure_reason', ARGV[5], 'failure_error', ARGV[6], 'failure_status', ARGV[7])
  end
  if redis.call('HEXISTS', KEYS[1], 'failing_since') == 0 and num('success_at') < at then
    redis.call('HSET', KEYS[1], 'failing_since', at)
    redis.call('ZADD', KEYS[2], at, member)
  end
else
  redis.call('HINCRBY', KEYS[1], 'dead_lettered', 1)
  if at >= num('dead_at') then redis.call('HSET', KEYS[1], 'dead_at', at, 'dead_notice', ARGV[4]) end
end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[8]))
return 1
`,
);

/** When and for which notice something happened. */
export interface WebhookEvent {
  at: string;
  notice_id: string;
}

/** One webhook's deliveries of one project's notices, as the API and the console show them. */
export interface WebhookStatusView {
  /** The first 16 hex digits of the SHA-256 of its URL: the key of its records. */
  id: string;
  /** Its configured `name`, or one derived from its URL. */
  name: string;
  /** `failing`: its last call failed (`failing_since`); `ok`: its last call took the notice; `unknown`: nothing recorded yet. */
  state: 'ok' | 'failing' | 'unknown';
  last_success: WebhookEvent | null;
  last_failure: (WebhookEvent & { reason: WebhookFailureReason; error: string; status?: number }) | null;
  /** The first failure since its last success (null while it is not failing). */
  failing_since: string | null;
  /** Notices of the project it never took: dead-lettered after NOTIFIER_WEBHOOK_MAX_ATTEMPTS deliveries. */
  dead_lettered: number;
  last_dead_lettered: WebhookEvent | null;
}

/** A failing webhook of a project (the console's list). */
export interface FailingWebhook {
  project: string;
  status: WebhookStatusView;
}

const REASON_CODES: ReadonlySet<string> = new Set(WEBHOOK_FAILURE_REASONS.map((r) => r.code));
const iso = (ms: string | undefined): string | null => {
  const n = Number(ms);
  return ms === undefined || ms === '' || !Number.isFinite(n) ? null : new Date(n).toISOString();
};

/**
 * What the notifier knows of each webhook's deliveries, per project: the last success, the last
 * failure with its reason code, since when it has been failing, and how many of the project's
 * notices it never took (dead-lettered). Kept in Redis beside the delivery marks
 * (`<prefix>:webhooks:status:<id>:<project>`, a hash, 90 days after its last write; the failing
 * ones also in `<prefix>:webhooks:failing`), written by every sender — the consumer's deliveries,
 * an operator's redelivery, the dead letter — of every notifier instance. Per project, so a token
 * reads only its projects' deliveries of a webhook that serves several. It is operational state,
 * not a projection: a Redis that lost it starts again empty (the dead letters themselves stay in
 * `<PREFIX>_DLQ`: `baton dlq list --source notifier-webhooks`).
 */
@Injectable()
export class WebhookStatus {
  /** The configured webhooks' names (`name`, or derived from the URL). */
  readonly names: WebhookNames;
  private readonly targets: readonly WebhookTarget[];
  private readonly prefix: string;

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime<ServiceConfig>,
    @Inject(NOTIFIER_CONFIG) config: NotifierConfig,
  ) {
    this.targets = config.NOTIFIER_WEBHOOKS;
    this.names = new WebhookNames(this.targets);
    this.prefix = runtime.config.BATON_PREFIX;
  }

  private get redis(): Redis {
    if (!this.runtime.redis) throw new Error('webhook status needs Redis (REDIS_URL)');
    return this.runtime.redis.client;
  }

  private key(id: string, project: string): string {
    return `${this.prefix}:webhooks:status:${id}:${project}`;
  }

  private get failingKey(): string {
    return `${this.prefix}:webhooks:failing`;
  }

  /** The webhooks a notice of `project` goes to, in configuration order, one per id. */
  servingProject(project: string): string[] {
    const ids = this.targets.filter((t) => t.projects === undefined || t.projects.includes(project)).map((t) => targetId(t));
    return [...new Set(ids)];
  }

  private async write(project: string, noticeId: string, id: string, outcome: Outcome, at: number): Promise<void> {
    const failed = outcome.kind === 'failed' ? outcome : null;
    await RECORD.run(
      this.redis,
      [this.key(id, project), this.failingKey],
      [
        outcome.kind,
        at,
        projectRef(project, id),
        noticeId,
        failed?.reason ?? '',
        failed?.error ?? '',
        failed?.status !== undefined ? String(failed.status) : '',
        WEBHOOK_STATUS_TTL_SEC,
      ],
    );
  }

  /**
   * Record what one delivery pass of `notice` did: each webhook that took it (a success) and each
   * that failed (with its reason). Webhooks skipped (they had it) or busy (another sender is on it)
   * were not called: nothing to record. Never throws: a status Redis did not take is logged, and
   * the delivery goes on as it would have.
   */
  async record(notice: Pick<HumanActionNotice, 'project' | 'notice_id'>, report: Pick<DeliveryReport, 'delivered' | 'failed'>): Promise<void> {
    const at = Date.now();
    try {
      await Promise.all([
        ...report.delivered.map((id) => this.write(notice.project, notice.notice_id, id, { kind: 'ok' }, at)),
        ...report.failed.map((f) =>
          this.write(
            notice.project,
            notice.notice_id,
            f.target,
            { kind: 'failed', reason: f.reason, error: f.error, ...(f.status !== undefined ? { status: f.status } : {}) },
            at,
          ),
        ),
      ]);
    } catch (error) {
      this.runtime.logger.warn('webhook status not recorded', { project: notice.project, notice_id: notice.notice_id, error: String(error) });
    }
  }

  /** Record that `notice` was dead-lettered for the webhooks of `ids` (those that never took it). Never throws. */
  async deadLettered(notice: Pick<HumanActionNotice, 'project' | 'notice_id'>, ids: readonly string[]): Promise<void> {
    const at = Date.now();
    try {
      await Promise.all([...new Set(ids)].map((id) => this.write(notice.project, notice.notice_id, id, { kind: 'dead' }, at)));
    } catch (error) {
      this.runtime.logger.warn('webhook status not recorded', { project: notice.project, notice_id: notice.notice_id, error: String(error) });
    }
  }

  /** The status of each webhook serving `project`, in configuration order. */
  async ofProject(project: string): Promise<WebhookStatusView[]> {
    const ids = this.servingProject(project);
    if (ids.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hgetall(this.key(id, project));
    const replies = (await pipeline.exec()) ?? [];
    return ids.map((id, i) => {
      const [error, fields] = replies[i] ?? [new Error('no reply'), null];
      if (error) throw error;
      return this.view(id, fields as Record<string, string>);
    });
  }

  /**
   * The webhooks failing now for the projects `visible` accepts (a configured webhook serving that
   * project), longest failing first — what the console's inbox shows. Reads the failing index,
   * which holds only webhooks failing now.
   */
  async failing(visible: (project: string) => boolean): Promise<FailingWebhook[]> {
    if (this.targets.length === 0) return [];
    const members = await this.redis.zrange(this.failingKey, '0', '199');
    const wanted = members
      .map((member) => parseProjectRef(member))
      .filter((ref): ref is { project: string; id: string } => ref !== null && visible(ref.project) && this.servingProject(ref.project).includes(ref.id));
    if (wanted.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const ref of wanted) pipeline.hgetall(this.key(ref.id, ref.project));
    const replies = (await pipeline.exec()) ?? [];
    return wanted
      .map((ref, i) => ({ project: ref.project, status: this.view(ref.id, (replies[i]?.[1] ?? {}) as Record<string, string>) }))
      .filter((entry) => entry.status.state === 'failing');
  }

  private view(id: string, fields: Record<string, string>): WebhookStatusView {
    const successAt = iso(fields['success_at']);
    const failureAt = iso(fields['failure_at']);
    const failingSince = iso(fields['failing_since']);
    const deadAt = iso(fields['dead_at']);
    const reason = fields['failure_reason'] ?? '';
    const status = Number(fields['failure_status']);
    return {
      id,
      name: this.names.of(id),
      state: failingSince !== null ? 'failing' : successAt !== null ? 'ok' : 'unknown',
      last_success: successAt !== null ? { at: successAt, notice_id: fields['success_notice'] ?? '' } : null,
      last_failure:
        failureAt !== null
          ? {
              at: failureAt,
              notice_id: fields['failure_notice'] ?? '',
              reason: (REASON_CODES.has(reason) ? reason : 'request_failed') as WebhookFailureReason,
              error: fields['failure_error'] ?? '',
              ...(fields['failure_status'] !== undefined && fields['failure_status'] !== '' && Number.isInteger(status) ? { status } : {}),
            }
          : null,
      failing_since: failingSince,
      dead_lettered: Number(fields['dead_lettered'] ?? 0) || 0,
      last_dead_lettered: deadAt !== null ? { at: deadAt, notice_id: fields['dead_notice'] ?? '' } : null,
    };
  }
}
