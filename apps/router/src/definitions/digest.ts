import { createHash } from 'node:crypto';
import type { ProjectDefinition } from '@baton/contracts';
import { canonicalJson } from '@baton/projections';

/**
 * The digest of a project definition: SHA-256 of its canonical JSON (object keys sorted at every
 * level, after zod applied defaults), as `sha256:<hex>`. Equal definitions always have equal
 * digests, whatever the key order they were written in.
 */
export function definitionDigest(definition: ProjectDefinition): string {
  return `sha256:${createHash('sha256').update(canonicalJson(definition)).digest('hex')}`;
}
