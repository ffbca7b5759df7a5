import { Module } from '@nestjs/common';
import { WebhookDelivery } from './webhook-delivery';

/** Human action notices to webhooks (signed, retried with backoff, deduplicated). */
@Module({ providers: [WebhookDelivery], exports: [WebhookDelivery] })
export class NoticesModule {}
