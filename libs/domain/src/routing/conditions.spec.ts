import { conditionHolds, parseCondition } from './conditions';

describe('WHEN conditions (seed 001)', () => {
  it('IS SET and IS NOT SET treat a missing, null or empty variable as not set', () => {
    expect(conditionHolds('annual_income IS NOT SET', {})).toBe(true);
    expect(conditionHolds('annual_income IS NOT SET', { annual_income: null })).toBe(true);
    expect(conditionHolds('annual_income IS SET', { annual_income: '' })).toBe(false);
    expect(conditionHolds('annual_income IS SET', { annual_income: 0 })).toBe(true);
  });

  it('the check != "" is true when the value is missing', () => {
    expect(conditionHolds('annual_income != ""', {})).toBe(true);
    expect(conditionHolds('annual_income = ""', {})).toBe(false);
    expect(conditionHolds('annual_income IS SET', {})).toBe(false);
  });

  it('comparisons =, !=, <, >, <=, >= with numbers and quoted strings', () => {
    const v = { income: 50000, tier: 'gold' };
    expect(conditionHolds('income > 40000', v)).toBe(true);
    expect(conditionHolds('income >= 50000', v)).toBe(true);
    expect(conditionHolds('income < 50000', v)).toBe(false);
    expect(conditionHolds('income <= 50000', v)).toBe(true);
    expect(conditionHolds('income = 50000', v)).toBe(true);
    expect(conditionHolds('tier = "gold"', v)).toBe(true);
    expect(conditionHolds("tier != 'gold'", v)).toBe(false);
    expect(conditionHolds('missing > 1', v)).toBe(false);
  });

  it('AND binds tighter than OR; NOT and parentheses group', () => {
    expect(conditionHolds('a IS SET OR b IS SET AND c IS SET', { a: 1 })).toBe(true);
    expect(conditionHolds('(a IS SET OR b IS SET) AND c IS SET', { a: 1 })).toBe(false);
    expect(conditionHolds('NOT a IS SET', {})).toBe(true);
    expect(conditionHolds('a is set and b is not set', { a: 1 })).toBe(true);
  });

  it('a // in a WHEN outside quotes starts a comment', () => {
    expect(conditionHolds('annual_income IS SET // the gate is passed', { annual_income: 1 })).toBe(true);
    expect(conditionHolds('note = "http://x" // comment', { note: 'http://x' })).toBe(true);
    expect(conditionHolds('a IS SET // OR b IS SET', { b: 1 })).toBe(false);
  });

  it('natural language does not parse as a condition', () => {
    expect(parseCondition('the customer asks about something other than income').ok).toBe(false);
    expect(parseCondition('x IS').ok).toBe(false);
    const ok = parseCondition('a IS SET AND b > 2');
    expect(ok.ok && ok.variables.sort()).toEqual(['a', 'b']);
  });
});
