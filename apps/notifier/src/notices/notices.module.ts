import { Module } from '@nestjs/common';
import { WebhookDelivery } from './webhook-delivery';
import { WebhookStatus } from './webhook-status';

/** Human action notices to webhooks (signed, retried with backoff, deduplicated), and what each webhook's deliveries did. */
@Module({ providers: [WebhookDelivery, WebhookStatus], exports: [WebhookDelivery, WebhookStatus] })
export class NoticesModule {}
