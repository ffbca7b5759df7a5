import { Inject, Injectable } from '@nestjs/common';
import type { BatonViews, InboxItem, ItemFilters } from '@baton/projections';
import { BATON_VIEWS } from '../projection/tokens';
import type { ItemDetails } from './inbox-page';

/** Loads inbox items with what their cards show (the stop packet, the handoff record). */
@Injectable()
export class InboxReader {
  constructor(@Inject(BATON_VIEWS) readonly views: BatonViews) {}

  /** One page of items matching `filters`, newest first, each with its details. */
  async page(filters: ItemFilters, limit: number, cursor: string | null): Promise<{ items: ItemDetails[]; nextCursor: string | null }> {
    const page = await this.views.inbox({ filters, order: 'newest', limit, cursor });
    return { items: await Promise.all(page.items.map((item) => this.details(item))), nextCursor: page.nextCursor };
  }

  /** The ids and statuses of the items of one page `filters` select (what the live script reconciles against: the page's own limit and cursor). */
  async ids(filters: ItemFilters, limit: number, cursor: string | null): Promise<Array<{ id: string; status: string }>> {
    const page = await this.views.inbox({ filters, order: 'newest', limit, cursor });
    return page.items.map((item) => ({ id: item.id, status: item.status }));
  }

  /** How many open items `filters` select, whatever their status filter (the heading's count). */
  openCount(filters: ItemFilters): Promise<number> {
    return this.views.inboxOpenCount(filters);
  }

  /** One item with its details, or null. */
  async item(id: string): Promise<ItemDetails | null> {
    const item = await this.views.inboxItem(id);
    return item ? this.details(item) : null;
  }

  private async details(item: InboxItem): Promise<ItemDetails> {
    switch (item.kind) {
      case 'stop':
        return { kind: 'stop', item, record: item.packet_id ? await this.views.stop(item.project, item.packet_id) : null };
      case 'hold':
        return { kind: 'hold', item };
      case 'handback':
      case 'escalation': {
        const view = item.handoff_id ? await this.views.handoff(item.project, item.handoff_id) : null;
        return { kind: item.kind, item, handoff: view?.handoff ?? null };
      }
      default:
        return { kind: 'hold', item };
    }
  }
}

/** True when an item passes the same filters the inbox query applies (used for single fragments). */
export function itemMatches(item: InboxItem, filters: ItemFilters): boolean {
  for (const [field, wanted] of Object.entries(filters)) {
    if (wanted === undefined) continue;
    const values: readonly string[] = typeof wanted === 'string' ? [wanted] : wanted;
    if (!values.includes(String(item[field] ?? ''))) return false;
  }
  return true;
}
