import { z } from 'zod';
import { DomainEventOf } from './envelope';
import { HandoffEventSchemas } from './handoff';
import { EventRegistry } from './registry';
import { RunEventSchemas } from './run';
import { ProjectDefinitionSchema } from './definition';
import { IsoTimeSchema } from './common';
import { ProjectControlEventSchemas } from './governance';
import { MeshEventSchemas } from './mesh';

/** Events of a project's definition aggregate: every publish is a new version (its stream seq). */
export const DefinitionEventSchemas = {
  'definition.published': z.strictObject({
    definition: ProjectDefinitionSchema,
    /** Who sent it: the admin connection (`admin`); on events stored before `on_behalf_of`, the person it named. */
    published_by: z.string().min(1).max(200),
    /**
     * The person the admin connection said it published for (its `Baton-Actor` header, the CLI's
     * `BATON_OPERATOR`): a claim recorded beside `published_by`, never as it. Absent when nobody was
     * named and on events stored before it.
     */
    on_behalf_of: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe('the person the admin connection said it published for (its Baton-Actor header): a claim, not checked; published_by is who sent it'),
    published_at: IsoTimeSchema,
    /** Digest of the canonical definition; publishing the same definition twice is a no-op. */
    digest: z.string().min(1).max(128),
  }),
} as const;
export type DefinitionEvent = DomainEventOf<typeof DefinitionEventSchemas>;

/**
 * Every event type Baton writes, with its aggregate and current version. Services decode what
 * they read from the streams through this registry (upcasting older versions).
 */
export function createEventRegistry(): EventRegistry {
  return new EventRegistry()
    .registerAll('run', RunEventSchemas)
    .registerAll('handoff', HandoffEventSchemas)
    .registerAll('definition', DefinitionEventSchemas)
    .registerAll('mesh', MeshEventSchemas)
    .registerAll('project', ProjectControlEventSchemas);
}
