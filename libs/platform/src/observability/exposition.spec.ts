import { metricSample, metricSamples } from './exposition';

const text = [
  '# HELP baton_events_handled_total Messages handled.',
  '# TYPE baton_events_handled_total counter',
  'baton_events_handled_total{service="router",consumer="router_in_result",type="in.result",outcome="acked"} 12',
  'baton_events_handled_total{service="router",consumer="router_in_result",type="in.result",outcome="retry"} 2',
  'baton_events_handled_total{service="router",consumer="router_dispatch",type="run.routed",outcome="acked"} 30',
  'baton_events_handled_total_extra{service="router"} 99',
  'baton_fold_cache_bytes{service="ledger"} 1.5e+7',
  'baton_label_escapes{service="x",note="a \\"quoted\\", b"} 3',
  'baton_no_labels 7',
].join('\n');

describe('metricSamples (Prometheus text exposition)', () => {
  it('returns every sample of a metric whose labels match, by value or pattern, and nothing of a metric whose name only starts the same', () => {
    expect(metricSamples(text, 'baton_events_handled_total')).toEqual([12, 2, 30]);
    expect(metricSamples(text, 'baton_events_handled_total', { outcome: 'acked' })).toEqual([12, 30]);
    expect(metricSamples(text, 'baton_events_handled_total', { consumer: /^router_in_/, outcome: 'acked' })).toEqual([12]);
    expect(metricSamples(text, 'baton_events_handled_total', { consumer: 'router_in' })).toEqual([]);
    expect(metricSamples(text, 'baton_events_handled_total', { missing: /.*/ })).toEqual([]);
  });

  it('reads exponent notation, quoted and escaped label values, and samples without labels', () => {
    expect(metricSample(text, 'baton_fold_cache_bytes', { service: 'ledger' })).toBe(15_000_000);
    expect(metricSample(text, 'baton_label_escapes', { note: 'a "quoted", b' })).toBe(3);
    expect(metricSample(text, 'baton_no_labels')).toBe(7);
    expect(metricSample(text, 'baton_absent')).toBeUndefined();
  });
});
