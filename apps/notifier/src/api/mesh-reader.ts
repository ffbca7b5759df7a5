import { Inject, Injectable } from '@nestjs/common';
import { meshViewOf, type MeshView } from '@baton/domain';
import { StreamNotFound, type StoredEvent } from '@baton/eventstore';
import { storedTimelineEntry, type TimelineEntry } from '@baton/projections';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import type { Principal } from '../auth/roles';
import { notFound } from './http';
import { meshRoute, resolveProjectAmong } from './resolve';

/** A mesh run as the API and the web page show it: the view and its event timeline. */
export interface MeshRead {
  mesh: MeshView;
  timeline: TimelineEntry[];
}

/**
 * Reads handoff mesh runs (issue 14) straight from the events stream through the event store:
 * the mesh aggregate's events, folded by the domain's `meshViewOf` (no projection holds meshes).
 * A mesh id is unique only within its project: the id-only lookup finds the projects from the
 * stream's subjects (`store.projectsOf`) and follows the same `ambiguous_id` rule as runs.
 */
@Injectable()
export class MeshReader {
  constructor(@Inject(RUNTIME) private readonly runtime: ServiceRuntime) {}

  /** The project a request means for mesh `id` (see `resolveProjectAmong`); an ambiguous id's refusal names `route` of each project (default: the API's). */
  project(caller: Principal, id: string, project: string | undefined, route: (project: string) => string = (p) => meshRoute(p, id)): Promise<string> {
    return resolveProjectAmong(
      {
        kind: 'mesh',
        what: 'mesh run',
        route,
        projectsOf: () => this.runtime.store.projectsOf('mesh', id).catch((error: unknown) => this.none(error)),
      },
      caller,
      id,
      project,
    );
  }

  /** The mesh run of `project` with `id`, or null when the project holds none. */
  async read(project: string, id: string): Promise<MeshRead | null> {
    let events: StoredEvent[];
    try {
      events = (await this.runtime.store.read({ project, kind: 'mesh', id })).events;
    } catch (error) {
      events = this.none(error);
    }
    const mesh = meshViewOf(events);
    return mesh === null ? null : { mesh, timeline: events.map((event) => storedTimelineEntry('mesh', event)) };
  }

  /** The mesh run a request names (404 when the caller may not see it or it does not exist). */
  async get(caller: Principal, id: string, project: string | undefined): Promise<MeshRead & { project: string }> {
    const resolved = await this.project(caller, id, project);
    const read = await this.read(resolved, id);
    if (!read) throw notFound('mesh run', id);
    return { project: resolved, ...read };
  }

  /** No events stream yet means no mesh; any other failure is thrown. */
  private none(error: unknown): never[] {
    if (error instanceof StreamNotFound) return [];
    throw error;
  }
}
