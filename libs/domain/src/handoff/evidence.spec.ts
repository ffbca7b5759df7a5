import { applyEvidenceFloor, evidenceFloorApplies, hasEvidence, isMeaningfulEntry } from './evidence';
import { report } from './handoff.fixtures';

describe('evidence floor: what counts as evidence', () => {
  it('a named test run, a described artifact or a real work product id is evidence', () => {
    expect(hasEvidence({ tests_run: [{ name: 'parser.spec.ts', passed: 12 }] })).toBe(true);
    expect(hasEvidence({ artifacts: [{ path: ' ', url: 'https://ci/build/7' }] })).toBe(true);
    expect(hasEvidence({ work_product_id: 'pr-42' })).toBe(true);
    expect(hasEvidence({ tests_run: ['', 'npm test: 40 passed'] })).toBe(true);
  });

  it('empty or placeholder entries are not evidence, however they are nested', () => {
    expect(hasEvidence(undefined)).toBe(false);
    expect(hasEvidence({ tests_run: [], artifacts: [] })).toBe(false);
    expect(isMeaningfulEntry([[{ a: [' n/a ', { b: 'TBD' }] }]])).toBe(false);
    expect(isMeaningfulEntry({ a: { b: { c: { d: { e: { f: { g: { h: 'deep' } } } } } } } })).toBe(false);
  });

  it('applicability depends only on the platform-attached actor kind: operators and humans are untouched', () => {
    expect((['agent', 'watchdog', 'system', 'operator', 'human'] as const).map((k) => evidenceFloorApplies(k))).toEqual([true, true, true, false, false]);
  });

  it('the floor copies the report and never mutates the caller`s', () => {
    const original = report({ evidence: { tests_run: [{}] } });
    const floored = applyEvidenceFloor(original, 'agent');
    expect(floored.report.outcome).toBe('partial');
    expect(original.outcome).toBe('completed');
  });
});
