import { JsonLogger, type LogLevel } from './logger';

describe('JsonLogger', () => {
  const capture = (level: LogLevel = 'info') => {
    const lines: Array<{ level: LogLevel; entry: Record<string, unknown> }> = [];
    const logger = new JsonLogger('ledger', level, { instance: 'i-1' }, (line, at) =>
      lines.push({ level: at, entry: JSON.parse(line) as Record<string, unknown> }),
    );
    return { logger, lines };
  };

  it('a child carries its context over its parents, the nearest winning, and leaves its parent unchanged', () => {
    const { logger, lines } = capture();
    const run = logger.child({ project: 'p', workflow_run_id: 'wr-1' });
    const handoff = run.child({ handoff_id: 'ho-1', project: 'q' });
    handoff.info('claimed', { lease_ms: 5 });
    run.warn('slow');
    logger.info('plain');
    expect(lines.map((l) => ({ ...l.entry, time: undefined }))).toEqual([
      { level: 'info', service: 'ledger', msg: 'claimed', instance: 'i-1', project: 'q', workflow_run_id: 'wr-1', handoff_id: 'ho-1', lease_ms: 5 },
      { level: 'warn', service: 'ledger', msg: 'slow', instance: 'i-1', project: 'p', workflow_run_id: 'wr-1' },
      { level: 'info', service: 'ledger', msg: 'plain', instance: 'i-1' },
    ]);
    expect(typeof lines[0]!.entry['time']).toBe('string');
  });

  it('lines under the configured level are not written, by parents or children; errors carry their name, message and stack', () => {
    const { logger, lines } = capture('warn');
    const child = logger.child({ handoff_id: 'ho-1' });
    child.info('not written');
    child.debug('not written');
    child.error('failed', new TypeError('bad input'));
    expect(lines).toHaveLength(1);
    expect(lines[0]!.level).toBe('error');
    expect(lines[0]!.entry).toMatchObject({ msg: 'failed', handoff_id: 'ho-1', instance: 'i-1', err: { name: 'TypeError', message: 'bad input' } });
    expect(String((lines[0]!.entry['err'] as { stack: string }).stack)).toContain('TypeError: bad input');
  });
});
