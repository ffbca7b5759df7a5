import { z } from 'zod';

/** Hard caps applied at every entry point. A value over a cap is rejected, never truncated. */
export const Limits = {
  /** Largest message Baton accepts on any subject or HTTP body, in bytes. */
  maxMessageBytes: 256 * 1024,
  /** Largest AGENT_RUN_CONFIG sentinel JSON payload, in bytes. */
  maxSentinelBytes: 8 * 1024,
  /** Largest agent-authored body text, in characters. */
  maxBodyChars: 128 * 1024,
  /** What a run keeps of an agent's posted body per turn (`run.result_recorded.posted_body`). */
  maxPostedBodyChars: 16 * 1024,
  /** Longest identifier (ids, agent names, projects). */
  maxIdLength: 128,
  /** Longest short free text (summaries, reasons, user messages). */
  maxShortText: 4_000,
  /** Most entries in a list field (tried, artifacts, files_changed...). */
  maxListItems: 500,
} as const;

/** An identifier: printable, no whitespace, no subject wildcards or separators. */
export const IdSchema = z
  .string()
  .min(1)
  .max(Limits.maxIdLength)
  .regex(/^[A-Za-z0-9_\-:@]+$/, 'ids may hold letters, digits and _ - : @ only');

/** A project key. It becomes a NATS subject token, so it is stricter than an id. */
export const ProjectIdSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[a-z0-9][a-z0-9_-]*$/, 'project keys are lowercase letters, digits, _ and -');

/**
 * An agent name as written in definitions and sentinels. It becomes a NATS subject token (results
 * and offers are addressed per agent), so it may not hold dots, spaces or wildcards.
 */
export const AgentNameSchema = z
  .string()
  .min(1)
  .max(Limits.maxIdLength)
  .regex(/^[A-Za-z0-9_-]+$/, 'agent names may hold letters, digits, _ and - only');

export const IsoTimeSchema = z.iso.datetime({ offset: true });

export const ShortTextSchema = z.string().max(Limits.maxShortText);

export type Id = z.infer<typeof IdSchema>;
export type ProjectId = z.infer<typeof ProjectIdSchema>;
export type AgentName = z.infer<typeof AgentNameSchema>;
