import { z } from 'zod';
import { PoisonError, TransientError } from './errors';
import { pullCount } from './pull-size';
import { classifyError } from './runner';

describe('classifyError', () => {
  it('a TransientError is retried, with its own delay when it names one', () => {
    expect(classifyError(new TransientError('busy'))).toEqual({ kind: 'retry' });
    expect(classifyError(new TransientError('busy', { delayMs: 250 }))).toEqual({ kind: 'retry', delayMs: 250 });
  });

  it('poison input is never retried: PoisonError, bad JSON and zod failures are dead-lettered', () => {
    expect(classifyError(new PoisonError('no', 'unknown_agent'))).toEqual({ kind: 'poison', reason: 'unknown_agent' });
    expect(classifyError(new SyntaxError('Unexpected token'))).toEqual({ kind: 'poison', reason: 'malformed_json' });
    const parsed = z.object({ a: z.string() }).safeParse({});
    expect(classifyError(parsed.error)).toEqual({ kind: 'poison', reason: 'schema_violation' });
    expect(classifyError(new z.ZodError([]))).toEqual({ kind: 'poison', reason: 'schema_violation' });
  });

  it('an unknown failure is retried (then dead-lettered at maxDeliver), never dropped', () => {
    expect(classifyError(new Error('boom'))).toEqual({ kind: 'retry' });
    expect(classifyError({ status: 'error', message: 'Internal server error' })).toEqual({ kind: 'retry' });
  });
});

describe('pullCount (how many messages a pull asks for)', () => {
  it('asks for every free slot when they fit at the largest size seen', () => {
    expect(pullCount(100, 16 * 1024 * 1024, 2_000)).toBe(100);
    expect(pullCount(32, 1_000, 0)).toBe(32);
  });

  it('asks for no more than fit in the room left, and for at least one', () => {
    expect(pullCount(100, 1_000_000, 200_000)).toBe(5);
    expect(pullCount(100, 100, 200_000)).toBe(1);
    expect(pullCount(3, 1_000_000, 200_000)).toBe(3);
  });

  it('asks for none when no slot is free', () => {
    expect(pullCount(0, 1_000_000, 10)).toBe(0);
  });
});
