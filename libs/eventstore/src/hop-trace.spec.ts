import { context as otelContext } from '@opentelemetry/api';
import {
  ambientTracing,
  contextFromHeaders,
  continueTrace,
  currentTraceId,
  hopTrace,
  hopTraceHeaders,
  installTracing,
  parseTraceparent,
} from './trace-context';

// A process of its own (Jest runs each file in its own module registry and global): Baton's
// services install tracing without the ambient context manager.
const VALID = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';

describe('explicit hop traces (the services: no ambient context manager)', () => {
  it('installTracing() leaves the process without an ambient context: no promise hook, nothing ambient to read', async () => {
    expect(installTracing()).toBe(false);
    expect(ambientTracing()).toBe(false);
    await otelContext.with(contextFromHeaders({ traceparent: [VALID] }), async () => {
      expect(currentTraceId()).toBeUndefined();
    });
  });

  it("a message's hop trace keeps its trace id and flags, takes a span id of its own and carries tracestate on", () => {
    const hop = hopTrace({ traceparent: [VALID], tracestate: ['vendor=1'] });
    expect(hop.traceId).toBe(TRACE);
    const span = parseTraceparent(hop.traceparent)!;
    expect(span).toMatchObject({ traceId: TRACE, traceFlags: 1 });
    expect(span.spanId).not.toBe('00f067aa0ba902b7');
    expect(hopTraceHeaders(hop)).toEqual({ traceparent: hop.traceparent, tracestate: 'vendor=1' });
    // Unsampled stays unsampled.
    expect(hopTrace({ traceparent: ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00'] }).traceparent).toMatch(/-00$/);
  });

  it('a tracestate is carried on only when it is W3C tracestate of at most 512 characters (the sender chooses it; every later hop copies it)', () => {
    const carried = (tracestate: string) => hopTraceHeaders(hopTrace({ traceparent: [VALID], tracestate: [tracestate] }))['tracestate'];
    expect(carried('rojo=00f067aa0ba902b7,congo=t61rcWkgMzE')).toBe('rojo=00f067aa0ba902b7,congo=t61rcWkgMzE');
    expect(carried(' rojo=1 , tenant@vendor=x ')).toBe('rojo=1,tenant@vendor=x');
    expect(carried(`big=${'a'.repeat(600)}`)).toBeUndefined();
    expect(carried(Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(','))).toBeUndefined();
    expect(carried('Upper=1')).toBeUndefined();
    expect(carried('k=a,b')).toBeUndefined();
    expect(carried('k=v\u0001')).toBeUndefined();
    expect(carried('no-equals')).toBeUndefined();
    expect(hopTraceHeaders(hopTrace({ traceparent: [VALID], tracestate: ['k=v=w'] }))).toEqual({ traceparent: expect.any(String) });
  });

  it('reads the header whatever its case, as a plain value or a list', () => {
    expect(hopTrace({ Traceparent: [VALID] }).traceId).toBe(TRACE);
    expect(hopTrace({ TRACEPARENT: VALID }).traceId).toBe(TRACE);
  });

  it('a message without a valid traceparent starts a trace, unless asked not to', () => {
    for (const headers of [undefined, {}, { traceparent: ['00-00000000000000000000000000000000-00f067aa0ba902b7-01'] }, { traceparent: ['garbage'] }]) {
      const hop = hopTrace(headers);
      expect(hop.traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(hop.traceId).not.toBe(TRACE);
      expect(parseTraceparent(hop.traceparent)?.traceId).toBe(hop.traceId);
      expect(hopTrace(headers, false)).toBeUndefined();
    }
    expect(hopTraceHeaders(undefined)).toEqual({});
  });

  it('continues a trace known only by its id with a fresh span', () => {
    const a = continueTrace(TRACE);
    const b = continueTrace(TRACE);
    expect(parseTraceparent(a.traceparent)).toMatchObject({ traceId: TRACE, traceFlags: 1 });
    expect(a.traceparent).not.toBe(b.traceparent);
  });
});
