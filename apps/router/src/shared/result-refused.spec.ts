import { ResultRefusedSchema } from '@baton/contracts';
import { refusedResultNotice, type StoredRefusal } from './result-refused';

const AT = '2026-01-01T00:00:00.000Z';
const refusal = (type: StoredRefusal['type'], payload: Partial<StoredRefusal['payload']>): StoredRefusal => ({
  type,
  project: 'shop',
  runId: type === 'run.result_rejected' ? 'wr-1' : 'm-1',
  seq: 42,
  occurredAt: AT,
  payload: { result_id: 'r-1', agent: 'coder', code: 'handoff_not_claimed', ...payload },
});

describe('the refused-result notice (docs/runs.md rule 3c)', () => {
  it('a refused agent result is told to its agent: the run, the result, the handoff and claim it named, the code — never the words', () => {
    const notice = refusedResultNotice(
      refusal('run.result_rejected', { refused: 'result', handoff_id: 'ho-s-wr-1', claim_id: 'c-1', message: "run wr-1 waits for 'reviewer', not 'coder'" }),
    );
    expect(notice).toEqual({
      project: 'shop',
      agent: 'coder',
      of: 'result',
      workflow_run_id: 'wr-1',
      result_id: 'r-1',
      handoff_id: 'ho-s-wr-1',
      claim_id: 'c-1',
      code: 'handoff_not_claimed',
      seq: 42,
      at: AT,
    });
    expect(ResultRefusedSchema.safeParse(notice).success).toBe(true);
  });

  it('a refused mesh turn is told as of turn, on the mesh run', () => {
    const notice = refusedResultNotice(refusal('mesh.turn_rejected', { of: 'turn', code: 'mesh_not_running' }));
    expect(notice).toEqual({
      project: 'shop',
      agent: 'coder',
      of: 'turn',
      workflow_run_id: 'm-1',
      result_id: 'r-1',
      code: 'mesh_not_running',
      seq: 42,
      at: AT,
    });
    expect(ResultRefusedSchema.safeParse(notice).success).toBe(true);
  });

  it('nothing for what no agent sent (an operator`s answer, a customer`s message) nor for a refusal that does not say what it refused', () => {
    expect(refusedResultNotice(refusal('run.result_rejected', { refused: 'answer', agent: 'operator' }))).toBeNull();
    expect(refusedResultNotice(refusal('run.result_rejected', { refused: 'message', agent: 'customer' }))).toBeNull();
    expect(refusedResultNotice(refusal('mesh.turn_rejected', { of: 'answer', agent: 'operator' }))).toBeNull();
    expect(refusedResultNotice(refusal('run.result_rejected', {}))).toBeNull();
    expect(refusedResultNotice(refusal('mesh.turn_rejected', {}))).toBeNull();
  });
});
