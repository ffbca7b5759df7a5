import { context as otelContext } from '@opentelemetry/api';
import {
  contextFromHeaders,
  currentTraceId,
  formatTraceparent,
  installTracing,
  newSpanId,
  newTraceId,
  parseTraceparent,
  traceHeaders,
  traceIdFromHeaders,
} from './trace-context';

const VALID = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

describe('W3C trace context over NATS headers, with the ambient context manager', () => {
  beforeAll(() => expect(installTracing({ ambientContext: true })).toBe(true));

  it('span and trace ids from the random pool: the W3C lengths in lowercase hex, never all zero, no repeats across pool refills', () => {
    const spans = Array.from({ length: 3000 }, () => newSpanId());
    const traces = Array.from({ length: 1000 }, () => newTraceId());
    expect(spans.every((id) => /^[0-9a-f]{16}$/.test(id) && id !== '0'.repeat(16))).toBe(true);
    expect(traces.every((id) => /^[0-9a-f]{32}$/.test(id) && id !== '0'.repeat(32))).toBe(true);
    expect(new Set(spans).size).toBe(spans.length);
    expect(new Set(traces).size).toBe(traces.length);
  });

  it('parses a valid traceparent and formats it back unchanged', () => {
    const span = parseTraceparent(VALID)!;
    expect(span).toMatchObject({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: 1 });
    expect(formatTraceparent(span)).toBe(VALID);
  });

  it('refuses invalid traceparents: all-zero ids, version ff, wrong lengths, upper case', () => {
    for (const bad of [
      '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',
      'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01',
      '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01',
      '',
    ]) {
      expect(parseTraceparent(bad)).toBeNull();
    }
  });

  it('a consumed message continues its trace with a new span id; its publishes carry that hop as parent', () => {
    const ctx = contextFromHeaders({ Traceparent: [VALID] });
    otelContext.with(ctx, () => {
      expect(currentTraceId()).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
      const out = parseTraceparent(traceHeaders()['traceparent'])!;
      expect(out.traceId).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
      expect(out.spanId).not.toBe('00f067aa0ba902b7');
    });
  });

  it('outside a trace nothing is injected unless a new trace is asked for (the SDK publishing a result)', () => {
    expect(currentTraceId()).toBeUndefined();
    expect(traceHeaders()).toEqual({});
    expect(traceIdFromHeaders(traceHeaders({ startIfMissing: true }))).toMatch(/^[0-9a-f]{32}$/);
  });

  it('the context follows awaits inside the handler', async () => {
    await otelContext.with(contextFromHeaders({ traceparent: VALID }), async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      expect(currentTraceId()).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    });
  });
});
