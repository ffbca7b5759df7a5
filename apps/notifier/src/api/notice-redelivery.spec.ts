import type { Redis } from 'ioredis';
import type { BatonViews } from '@baton/projections';
import type { Principal } from '../auth/roles';
import type { WebhookDelivery } from '../notices/webhook-delivery';
import type { WebhookStatus } from '../notices/webhook-status';
import { WebhookSender } from '../notices/webhook-sender';
import type { NotifierConfig } from '../notifier.config';
import { ApiError } from './http';
import { NoticeRedelivery } from './notice-redelivery';

// The refusals decided before anything is read or sent (the delivery itself: webhooks.int-spec.ts).
describe('notice redelivery: refusals before any read or send', () => {
  const operator = { tokenId: 't1', name: 'olga', role: 'operator', projects: '*', via: 'token' } as unknown as Principal;
  const config = { NOTIFIER_WEBHOOK_MAX_ATTEMPTS: 8 } as NotifierConfig;
  // Nothing is sent, so nothing is recorded: the refusals come first.
  const status = {} as WebhookStatus;
  const views = {
    notice: () => {
      throw new Error('not read: the refusal comes first');
    },
  } as unknown as BatonViews;
  const codeOf = async (redelivery: NoticeRedelivery, project: string, caller: Principal = operator) => {
    try {
      await redelivery.redeliver(project, 'nt-x-1', caller);
      return 'sent';
    } catch (error) {
      const response = (error as ApiError).getResponse() as { error: { code: string } };
      return `${(error as ApiError).getStatus()} ${response.error.code}`;
    }
  };

  it('409 no_webhooks when the notifier has none, or none serves the project; 403 for a viewer; 404 for a project the token may not see', async () => {
    const none = new NoticeRedelivery(views, config, { webhookSender: null } as unknown as WebhookDelivery, status);
    expect(await codeOf(none, 'shop')).toBe('409 no_webhooks');
    // Redis is never reached: the sender only names the webhooks serving a project here.
    const sender = new WebhookSender({
      targets: [{ url: 'http://127.0.0.1:9/hook', secret: 'secret-0123456789ab', projects: ['outlet'] }],
      redis: {} as Redis,
      prefix: 'p',
      timeoutMs: 1000,
    });
    const other = new NoticeRedelivery(views, config, { webhookSender: sender } as unknown as WebhookDelivery, status);
    expect(await codeOf(other, 'shop')).toBe('409 no_webhooks');
    expect(await codeOf(other, 'outlet', { ...operator, role: 'viewer' } as Principal)).toBe('403 role_forbidden');
    expect(await codeOf(other, 'outlet', { ...operator, projects: ['shop'] } as unknown as Principal)).toBe('404 not_found');
  });
});
