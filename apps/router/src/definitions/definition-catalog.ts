import { Inject, Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import type { DefinitionEvent } from '@baton/contracts';
import { LruCache, watchEvents, type AggregateRef, type CoreSubscription } from '@baton/eventstore';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { evolveDefinition, initialDefinitionState, type DefinitionState } from './definition.decider';

/** The definition aggregate of a project: one per project, id `current`. */
export function definitionRef(project: string): AggregateRef {
  return { project, kind: 'definition', id: 'current' };
}

interface Entry {
  state: DefinitionState;
  lastSeq: number;
  /** Bumped by every invalidation; a load that raced with one leaves the entry stale. */
  generation: number;
  stale: boolean;
}

/**
 * The router's cache of project definitions (every published version, so a run keeps the
 * workflow version it started with). Invalidation: a `definition.published` seen on
 * `<prefix>.ev.*.definition.*` (`watchEvents`, a core NATS subscription: JetStream publishes reach
 * plain subscribers too, so every router instance hears every publish) marks the project stale, and a
 * stale project or a caller that asks for `fresh` re-reads only what was appended since the cached
 * sequence. A miss (or a restart) always rebuilds from the stream.
 */
@Injectable()
export class DefinitionCatalog implements OnModuleInit, OnModuleDestroy {
  private readonly entries = new LruCache<string, Entry>(1_000);
  private readonly generations = new Map<string, number>();
  private subscription: CoreSubscription | null = null;

  constructor(@Inject(RUNTIME) private readonly runtime: ServiceRuntime) {}

  onModuleInit(): void {
    this.subscription = watchEvents(this.runtime.nats, this.runtime.config.BATON_PREFIX, 'definition', (event) => this.invalidate(event.project));
  }

  onModuleDestroy(): void {
    this.subscription?.unsubscribe();
    this.subscription = null;
  }

  /** Mark a project's cached definitions stale; the next {@link load} re-reads the stream. */
  invalidate(project: string): void {
    this.generations.set(project, (this.generations.get(project) ?? 0) + 1);
    const entry = this.entries.get(project);
    if (entry) entry.stale = true;
  }

  /**
   * The project's published definitions, oldest first (empty when it never published one).
   * Served from the cache unless the entry is missing or stale or `fresh` is asked for; a re-read
   * fetches only the events after the cached sequence. Throws the event store's errors (the
   * caller's message is then retried).
   */
  async load(project: string, opts: { fresh?: boolean } = {}): Promise<DefinitionState> {
    const cached = this.entries.get(project);
    if (cached && !cached.stale && !opts.fresh) return cached.state;
    const generation = this.generations.get(project) ?? 0;
    const base = cached ?? { state: initialDefinitionState(), lastSeq: 0 };
    const read = await this.runtime.store.read(definitionRef(project), { afterSeq: base.lastSeq });
    if (read.lastSeq < base.lastSeq) {
      // The stream went backwards (recreated): forget everything and rebuild.
      this.entries.delete(project);
      return this.load(project, { fresh: true });
    }
    const state = read.events.reduce((s, e) => evolveDefinition(s, { type: e.type, data: e.payload } as DefinitionEvent), base.state);
    const stale = (this.generations.get(project) ?? 0) !== generation;
    this.entries.set(project, { state, lastSeq: Math.max(read.lastSeq, base.lastSeq), generation, stale });
    return state;
  }
}
