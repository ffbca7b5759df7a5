import type {
  AgentDefinition,
  AgentResult,
  DecisionSignal,
  ExecutionSettings,
  PendingToolCall,
  RefusedKind,
  RunAnswer,
  RunPeople,
  StopCap,
  StopEscalation,
  StopWhy,
  WorkflowDefinition,
} from '@baton/contracts';
import type { HandoffClaimView } from '../claims';
import type { ResumeActorRole } from '../stop';

/** Time and the acting identity arrive with every command; the domain reads no clock. */
export interface RunCommandMetadata {
  /** ISO time the command is decided at. */
  now: string;
  actor: string;
  /** The actor's role; `resume` requires `operator` or `admin`. */
  actorRole?: ResumeActorRole;
}

/**
 * Start a workflow run. Idempotent: starting a started run again yields no events. Refused
 * (`no_notice_recipient`) when none of started_by / issue_author / trigger_author is known, since
 * every stop-for-a-human outcome must notify someone.
 */
export interface StartRun {
  type: 'start_run';
  data: {
    workflow_run_id: string;
    project: string;
    workflow: WorkflowDefinition;
    people: RunPeople;
    variables?: Record<string, unknown>;
    /**
     * Conversation runs (seed 001): the project's agents with their routes. When any agent
     * declares routes, memory, gather or complete, `input` is the customer's first message: the
     * entry agent's WHEN routes are evaluated on it before any model runs.
     */
    agents?: readonly AgentDefinition[];
    input?: string;
    /** The published definition the run is pinned to. */
    definition_digest?: string;
  };
  metadata: RunCommandMetadata;
}

/**
 * Record an agent's result and route the run. `signal` is what the result decided: when omitted
 * it is derived from the result (`decision` wins; else the body's sentinel is parsed). The
 * definitions the run routes over are looked up by the caller and passed in.
 */
export interface RecordResult {
  type: 'record_result';
  data: {
    result: AgentResult;
    signal?: DecisionSignal;
    workflow: WorkflowDefinition;
    agents: readonly AgentDefinition[];
    /** The project's EXECUTION settings (parentReturn). */
    execution?: ExecutionSettings;
    /**
     * What the caller read of the handoff the result names (`result.handoff_id`), just before
     * deciding; null or absent when it read nothing. While the run is on a handoff the result is
     * refused unless it names that handoff and the claim this view shows as current, held by the
     * result's agent (see `checkResultClaim`).
     */
    handoff?: HandoffClaimView | null;
    /** When the inbox stored the result (ISO): rule 4b accepts it under a claim that lapsed after that. */
    stored_at?: string;
    /**
     * This result's `run.result_recorded`, under the same claim, is stored already and the command
     * is being completed (a retry of an append cut short): the claim rule is not judged again — the
     * record proves it passed, and the handoff's claim has moved on since (completed by this result,
     * lapsed, claimed anew). Set only through the router's decider (`resuming`).
     */
    claim_recorded?: true;
    /** The trace the result travelled in (its message's `traceparent`): a stop it causes links it in `trace_ids`. */
    trace_id?: string;
  };
  metadata: RunCommandMetadata;
}

/** Apply an operator's answer to the run's hold or open stop packet. */
export interface ResumeRun {
  type: 'resume';
  data: {
    answer: RunAnswer;
    workflow: WorkflowDefinition;
    agents: readonly AgentDefinition[];
  };
  metadata: RunCommandMetadata;
}

/**
 * A stop requested from outside the run (the watchdog's thrash guard, an open circuit...). The
 * run's own facts (project, agent, step) are filled in from its state. Idempotent on `packet_id`.
 */
export interface StopRun {
  type: 'stop';
  data: {
    packet_id: string;
    why: StopWhy;
    tried?: readonly (string | { name: string; trace_id?: string })[];
    trace_ids?: readonly string[];
    pending?: PendingToolCall | null;
    detail?: string;
    cap?: StopCap;
    /** The escalated handoff the stop was asked for (recorded on `run.stopped`). */
    escalation?: StopEscalation;
    /**
     * The agent the stop is about, when it is not the run's current one: a circuit stop names the
     * agent whose circuit opened (the packet's `agent`); default the agent the run waits for.
     */
    agent?: string;
    /** The person the admin connection acts for (recorded on `run.stopped` beside the actor `admin`). */
    on_behalf_of?: string;
  };
  metadata: RunCommandMetadata;
}

/**
 * Record, in the run's history, a result that `record_result` refused (so an SRE reading the run
 * sees it). Idempotent on `result_id`.
 */
export interface RejectResult {
  type: 'reject_result';
  data: { result_id: string; agent: string; code: string; message: string; refused?: RefusedKind; handoff_id?: string; claim_id?: string };
  metadata: RunCommandMetadata;
}

/**
 * A customer turn of a conversation run (seed 001). Idempotent on `message_id`. While the run awaits
 * the customer the active agent's WHEN routes are evaluated before any model runs, then the
 * message goes to the route's target or to the active agent; while an agent of the running
 * conversation works it is queued (`run.message_queued`, at most MAX_QUEUED_MESSAGES) and
 * delivered the next time the run waits for the customer.
 */
export interface SessionMessageCommand {
  type: 'session_message';
  data: {
    message_id: string;
    text: string;
    /** Who sent it (the SessionMessage's `sent_by`), kept on a queued message. */
    sent_by?: string;
    /** The agent whose subject carried it (`…message.<agent>`), recorded on the message's events. */
    relayed_by?: string;
    workflow: WorkflowDefinition;
    agents: readonly AgentDefinition[];
    execution?: ExecutionSettings;
  };
  metadata: RunCommandMetadata;
}

/** Why a routed handoff failed before its target produced a result. */
export const HandoffFailureReason = {
  /** The ledger refused to create it (outcome `error`). */
  createRefused: 'create_refused',
  /** Its deadline passed with no result from the target (outcome `timeout`, issue 5). */
  timeout: 'timeout',
  /** It ended without a result: failed (`fail`), released by its claimer, abandoned (by a person, or by the router for a stopped run), or never offered because its run stopped first (outcome `error`). */
  ended: 'ended',
} as const;
export type HandoffFailureReason = (typeof HandoffFailureReason)[keyof typeof HandoffFailureReason];

/**
 * A handoff the run routed failed before its target produced a result (seed 001 ON_FAILURE):
 * the ledger refused to create it (`reason` `create_refused`, the default: outcome `error`) or
 * its deadline passed (`timeout`: outcome `timeout`), or it ended without a result (`ended`: its
 * claimer or a person failed or abandoned it). When it is the run's pending handoff, record
 * `handoff_completed` and apply the route's ON_FAILURE. When it is the handoff the running run's
 * current agent works on (`ended`, or `create_refused`: the ledger refused the step's handoff), the
 * run cannot go on without a person: it holds, and `continue` dispatches the same agent again. Otherwise — the child already ran or returned, the
 * run moved on, or the failure was applied before — nothing happens (idempotent).
 */
export interface HandoffFailedCommand {
  type: 'handoff_failed';
  data: {
    handoff_id: string;
    code: string;
    message: string;
    reason?: HandoffFailureReason;
    workflow: WorkflowDefinition;
    agents: readonly AgentDefinition[];
  };
  metadata: RunCommandMetadata;
}

export type RunCommand = StartRun | RecordResult | ResumeRun | StopRun | RejectResult | SessionMessageCommand | HandoffFailedCommand;
