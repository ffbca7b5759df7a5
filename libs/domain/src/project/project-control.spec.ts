import type { ProjectControlEvent } from '@baton/contracts';
import { given } from '../testing/given';
import { projectControlDecider, toProjectControlRecord, type ProjectControlCommand } from './project-control';

const now = '2026-01-01T00:00:00.000Z';
const admin = { now, actor: 'ops', role: 'admin' as const };
const pause = (key = 'k1', metadata: ProjectControlCommand['metadata'] = admin): ProjectControlCommand => ({
  type: 'pause',
  data: { project: 'p', pause_id: 'pause-1', reason: 'incident', idempotency_key: key },
  metadata,
});
const resume = (key = 'k2', metadata = admin): ProjectControlCommand => ({ type: 'resume', data: { project: 'p', idempotency_key: key }, metadata });
const paused: ProjectControlEvent = {
  type: 'project.paused',
  data: { project: 'p', at: now, idempotency_key: 'k1', pause_id: 'pause-1', paused_by: 'ops', reason: 'incident' },
};

describe('project kill switch', () => {
  it('an admin pauses an active project: project.paused', () => {
    given(projectControlDecider).when(pause()).then([paused]);
  });
  it('pause and resume are admin only', () => {
    given(projectControlDecider)
      .when(pause('k1', { ...admin, role: 'operator' } as never))
      .thenFails('admin_only');
  });
  it('pausing a paused project is refused; the same request retried changes nothing', () => {
    given(projectControlDecider, [paused]).when(pause('k9')).thenFails('project_already_paused');
    given(projectControlDecider, [paused]).when(pause('k1')).then([]);
  });
  it('resume ends the pause it names: project.resumed with the pause id', () => {
    given(projectControlDecider, [paused])
      .when(resume())
      .thenMatch([{ type: 'project.resumed', data: expect.objectContaining({ pause_id: 'pause-1' }) }]);
    given(projectControlDecider).when(resume()).thenFails('project_not_paused');
  });
});

describe('project kill switch: who sent it and whom it claims to act for', () => {
  const viaAdmin = { now, actor: 'admin', role: 'admin' as const, on_behalf_of: 'mallory' };
  it('the actor is who sent it (paused_by / resumed_by); the person the admin connection named is on_behalf_of beside it, in the record too', () => {
    const pausedFor: ProjectControlEvent = { type: 'project.paused', data: { ...paused.data, paused_by: 'admin', on_behalf_of: 'mallory' } };
    given(projectControlDecider).when(pause('k1', viaAdmin)).then([pausedFor]);
    given(projectControlDecider, [pausedFor])
      .when(resume('k2', viaAdmin))
      .thenMatch([{ type: 'project.resumed', data: expect.objectContaining({ resumed_by: 'admin', on_behalf_of: 'mallory' }) }]);
    const state = [pausedFor].reduce(projectControlDecider.evolve, projectControlDecider.initialState());
    expect(toProjectControlRecord('p', state)).toMatchObject({ status: 'paused', paused_by: 'admin', on_behalf_of: 'mallory' });
  });
  it('a pause stored before on_behalf_of folds as it was: its paused_by is the person, nothing claimed', () => {
    const state = [paused].reduce(projectControlDecider.evolve, projectControlDecider.initialState());
    expect(toProjectControlRecord('p', state)).toEqual({
      project: 'p',
      status: 'paused',
      pause_id: 'pause-1',
      paused_by: 'ops',
      paused_at: now,
      reason: 'incident',
      version: 1,
    });
  });
});

describe('project kill switch: idempotency keys are scoped', () => {
  it('a resume carrying the pause`s key still resumes; only the same command from the same admin is a retry', () => {
    given(projectControlDecider, [paused])
      .when(resume('k1'))
      .thenMatch([{ type: 'project.resumed' }]);
    given(projectControlDecider, [paused])
      .when(pause('k1', { ...admin, actor: 'other-admin' }))
      .thenFails('project_already_paused');
  });
  it('a stored key never lets a non-admin through: admin_only first', () => {
    given(projectControlDecider, [paused])
      .when(pause('k1', { ...admin, role: 'operator' } as never))
      .thenFails('admin_only');
  });
});

describe('project kill switch: a retry repeats the body', () => {
  const D1 = '11111111111111111111111111111111';
  const D2 = '22222222222222222222222222222222';
  it('the pause records its body digest; the same key with another body is idempotency_key_reused, with the same body a retry', () => {
    given(projectControlDecider)
      .when(pause('k1', { ...admin, digest: D1 }))
      .then([{ type: 'project.paused', data: { ...paused.data, command_digest: D1 } }]);
    const signed: ProjectControlEvent = { type: 'project.paused', data: { ...paused.data, command_digest: D1 } };
    given(projectControlDecider, [signed])
      .when(pause('k1', { ...admin, digest: D1 }))
      .then([]);
    given(projectControlDecider, [signed])
      .when(pause('k1', { ...admin, digest: D2 }))
      .thenFails('idempotency_key_reused');
    // Another admin's key is still not this admin's: decided as a pause (already paused).
    given(projectControlDecider, [signed])
      .when(pause('k1', { ...admin, actor: 'other-admin', digest: D2 }))
      .thenFails('project_already_paused');
  });
  it('a key stored before digests were recorded matches any body', () => {
    given(projectControlDecider, [paused])
      .when(pause('k1', { ...admin, digest: D2 }))
      .then([]);
  });
});
