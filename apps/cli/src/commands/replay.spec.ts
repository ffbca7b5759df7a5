import { RebuildBehindError, RebuildIncompleteError, RedisFullError, ShadowLostError, type RebuildResult } from '@baton/projections';
import { incompleteFailure, rebuildFailure } from './replay';

const swapped = (generation: number): RebuildResult => ({
  status: 'swapped',
  generation,
  previous: generation - 1,
  lastSeq: 120,
  cleanup: Promise.resolve({ generation: generation - 1, deletedKeys: 0 }),
});

describe('baton replay when some projections were swapped in and others failed', () => {
  it('names what is live now and what failed, with the command that rebuilds each failed one, and types both in details', () => {
    const error = incompleteFailure(
      new RebuildIncompleteError(
        { inbox: swapped(4), stops: swapped(3) },
        { runs: new ShadowLostError('runs', 7), notices: new RebuildBehindError('notices', 90, 3000) },
      ),
    );
    expect(error.message).toMatch(/^rebuilt inbox, stops; these failed: /);
    expect(error.message).toMatch(/rebuilding runs stopped: Redis lost its data .* generation 7 .*it was not swapped in/);
    expect(error.message).toMatch(/rebuilding notices failed: rebuild of notices stayed behind/);
    expect(error.message).toMatch(/Rebuild them again: baton replay --projection runs, baton replay --projection notices$/);
    // "nothing was swapped in" would be false here: two were.
    expect(error.message).not.toMatch(/nothing was swapped in/);
    expect(error.details).toEqual({
      rebuilt: ['inbox', 'stops'],
      failed: { runs: expect.stringMatching(/shadow generation 7 of runs was lost/), notices: expect.stringMatching(/stayed behind/) },
    });
  });

  it('one failure reads in the singular', () => {
    const error = incompleteFailure(new RebuildIncompleteError({ inbox: swapped(2) }, { runs: new Error('redis went away') }));
    expect(error.message).toBe('rebuilt inbox; failed: rebuilding runs failed: redis went away. Rebuild it again: baton replay --projection runs');
  });

  it('a rebuild Redis refused for being full fails redis_full, saying it was not swapped in and what to do; several all refused so: the whole failure is redis_full, one of several: failed', () => {
    // What ioredis rejects with when maxmemory refuses a write (recognised against a real Redis in redis-full.int-spec.ts).
    const oom = Object.assign(new Error("OOM command not allowed when used memory > 'maxmemory'."), { name: 'ReplyError' });
    expect(RedisFullError.of(oom)).not.toBeNull();
    const one = rebuildFailure('inbox', oom);
    expect(one.code).toBe('redis_full');
    expect(one.message).toMatch(/^rebuilding inbox stopped: Redis is full .* it was not swapped in\. Make room or raise maxmemory/);
    expect(one.message).not.toContain('OOM command not allowed');
    expect(rebuildFailure('inbox', new Error('something else')).code).toBe('failed');

    const allFull = incompleteFailure(new RebuildIncompleteError({ inbox: swapped(4) }, { runs: oom, stops: oom }));
    expect(allFull.code).toBe('redis_full');
    expect(allFull.message).toMatch(/^rebuilt inbox; these failed: rebuilding runs stopped: Redis is full/);
    const mixed = incompleteFailure(new RebuildIncompleteError({ inbox: swapped(4) }, { runs: oom, notices: new ShadowLostError('notices', 2) }));
    expect(mixed.code).toBe('failed');
  });
});
