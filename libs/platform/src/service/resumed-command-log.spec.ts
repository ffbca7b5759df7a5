import type { ResumedCommand, ResumedCommandOutcome } from '@baton/eventstore';
import { JsonLogger, type LogLevel } from '../logging/logger';
import { logResumedCommand } from './runtime';

describe('logResumedCommand: what an operator sees of a command found half-stored', () => {
  const resumed = (outcome: ResumedCommandOutcome, extra: Partial<ResumedCommand> = {}): ResumedCommand => ({
    subject: 'baton.ev.p1.run.r1',
    firstEventId: 'cmd-1:0',
    outcome,
    stored: 1,
    appended: outcome === 'completed' ? 1 : 0,
    storedTypes: ['run.result_recorded'],
    decidedTypes: outcome === 'refused' ? [] : ['run.result_recorded', 'run.routed'],
    ...extra,
  });
  const linesOf = (level: LogLevel, outcome: ResumedCommandOutcome, extra?: Partial<ResumedCommand>) => {
    const lines: { level: LogLevel; entry: Record<string, unknown> }[] = [];
    logResumedCommand(
      new JsonLogger('router', level, {}, (line, at) => lines.push({ level: at, entry: JSON.parse(line) as Record<string, unknown> })),
      resumed(outcome, extra),
    );
    return lines;
  };

  it('a plain retry is debug only, a completed one info', () => {
    expect(linesOf('info', 'already_complete')).toEqual([]);
    expect(linesOf('debug', 'already_complete').map((l) => l.level)).toEqual(['debug']);
    const [completed] = linesOf('info', 'completed');
    expect(completed?.level).toBe('info');
    expect(completed?.entry).toMatchObject({ subject: 'baton.ev.p1.run.r1', event_id: 'cmd-1:0', outcome: 'completed', appended: 1 });
  });

  it('a command left incomplete is an error naming the aggregate, what was stored, what was decided and the refusal', () => {
    const [refused] = linesOf('warn', 'refused', { error: { code: 'handoff_not_claimed', message: 'no' } });
    expect(refused?.level).toBe('error');
    expect(refused?.entry).toMatchObject({
      outcome: 'refused',
      subject: 'baton.ev.p1.run.r1',
      stored: ['run.result_recorded'],
      decided: [],
      refusal: { code: 'handoff_not_claimed' },
    });
    expect(String(refused?.entry['msg'])).toContain('refused');
    const [diverged] = linesOf('warn', 'diverged');
    expect(diverged?.level).toBe('error');
    expect(diverged?.entry).toMatchObject({ outcome: 'diverged', decided: ['run.result_recorded', 'run.routed'] });
  });
});
