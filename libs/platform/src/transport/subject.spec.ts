import { durableNameFor, resolvePattern, subjectMatches } from './subject';

describe('subject patterns', () => {
  it('`*` matches exactly one token and `>` one or more', () => {
    expect(subjectMatches('b.ev.*.handoff.*', 'b.ev.p.handoff.h1')).toBe(true);
    expect(subjectMatches('b.ev.*.handoff.*', 'b.ev.p.run.h1')).toBe(false);
    expect(subjectMatches('b.ev.*.handoff.*', 'b.ev.p.handoff.h1.x')).toBe(false);
    expect(subjectMatches('b.ev.>', 'b.ev.p.handoff.h1')).toBe(true);
    expect(subjectMatches('b.ev.>', 'b.ev')).toBe(false);
  });

  it('the {prefix} placeholder is replaced by the configured prefix', () => {
    expect(resolvePattern('{prefix}.in.*.result.*', 'baton')).toBe('baton.in.*.result.*');
  });

  it('derived durable names are stable, valid and distinct for patterns that slug alike', () => {
    const a = durableNameFor('router', 'baton.in.*.result.*');
    expect(a).toBe(durableNameFor('router', 'baton.in.*.result.*'));
    expect(a).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(durableNameFor('router', 'a.b')).not.toBe(durableNameFor('router', 'a_b'));
  });
});
