import type { HandoffEvent, HandoffEventData } from '@baton/contracts';
import { evolveHandoff, initialHandoffState, RunErrorCode, type HandoffState } from '@baton/domain';
import { hopTrace, type AggregateRef, type ReactorContext, type ReactorHandler } from '@baton/eventstore';
import { JsonLogger, type ServiceRuntime } from '@baton/platform';
import type { RunCommands } from '../runs/run-commands';
import { HandoffDeadlineReactor } from './handoff-deadline-reactor';

/*
 * Which run the reactor turns a handoff's deadline into a command for. The run a handoff belongs to
 * lives in the delegator's project: on a cross-project handoff (it lives in the target project) that
 * is `source_project`, never the handoff's own project. The run commands are recorded here, not
 * run: what is checked is the run they are addressed to.
 */
describe('handoff-deadline reactor: the run of a deadline', () => {
  const at = '2026-12-01T10:00:00.000Z';

  function reactorWith(): { reactor: HandoffDeadlineReactor; refs: AggregateRef[] } {
    const refs: AggregateRef[] = [];
    const runs = {
      runWithDefinitions: async (ref: AggregateRef) => {
        refs.push(ref);
        return { ok: false, error: { code: RunErrorCode.runNotFound, kind: 'not_found', message: 'no such run' } };
      },
    } as unknown as RunCommands;
    const logger = new JsonLogger('router', 'error', {}, () => undefined);
    return { reactor: new HandoffDeadlineReactor({ logger } as unknown as ServiceRuntime, runs), refs };
  }

  async function expire(reactor: HandoffDeadlineReactor, created: HandoffEventData<'handoff.created'>): Promise<void> {
    const before: HandoffState = evolveHandoff(initialHandoffState(), { type: 'handoff.created', data: created } as HandoffEvent);
    const payload: HandoffEventData<'handoff.deadline_expired'> = {
      handoff_id: created.handoff_id,
      at,
      idempotency_key: 'deadline-1',
      deadline_at: at,
      expired_by: 'baton-watchdog',
    };
    const event = {
      id: 'ev-deadline-1',
      type: 'handoff.deadline_expired',
      version: 1,
      aggregate: { kind: 'handoff', id: created.handoff_id },
      project: created.project,
      occurredAt: at,
      actor: 'baton-watchdog',
      origin: 'watchdog',
      causationId: null,
      correlationId: created.handoff_id,
      payload,
      seq: 2,
    };
    const handler = reactor.table.handlerOf('handoff.deadline_expired') as ReactorHandler<HandoffEvent, HandoffState>;
    await handler(event as never, { before, after: before }, { trace: hopTrace({}) } as unknown as ReactorContext);
  }

  const createdIn = (project: string, extra: Partial<HandoffEventData<'handoff.created'>> = {}): HandoffEventData<'handoff.created'> => ({
    handoff_id: 'ho-1',
    at,
    idempotency_key: 'create-1',
    project,
    kind: 'task',
    priority: 'medium',
    from_agent: 'alice',
    to_agent: 'bob',
    summary: 'x',
    context: {},
    acceptance: {},
    max_retries: 3,
    workflow_run_id: 'wr-1',
    deadline_at: at,
    ...extra,
  });

  it("a cross-project handoff's deadline is sent to its run in the source project, not to the target project's run of that id", async () => {
    const { reactor, refs } = reactorWith();
    await expire(reactor, createdIn('tgt', { source_project: 'src', cto_override: 'dec-1' }));
    expect(refs).toEqual([{ project: 'src', kind: 'run', id: 'wr-1' }]);
  });

  it("a handoff of the project's own run: its deadline goes to that run; a handoff of no run asks nothing", async () => {
    const { reactor, refs } = reactorWith();
    await expire(reactor, createdIn('tgt'));
    const { workflow_run_id: _none, ...runless } = createdIn('tgt');
    await expire(reactor, runless);
    expect(refs).toEqual([{ project: 'tgt', kind: 'run', id: 'wr-1' }]);
  });
});
