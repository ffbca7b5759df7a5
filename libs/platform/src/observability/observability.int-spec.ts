import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { Controller, Inject, Module } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import {
  PoisonError,
  batonStreamNames,
  connectNats,
  headersFrom,
  hopTraceHeaders,
  newTraceparent,
  parseTraceparent,
  traceIdFromHeaders,
  type NatsHandle,
} from '@baton/eventstore';
import { headers as natsHeaders } from 'nats';
import { runService, type RunningService } from '../service/bootstrap';
import { RUNTIME, type ServiceRuntime } from '../service/runtime';
import type { JetStreamContext } from '../transport/jetstream.context';
import { metricSample } from './exposition';

/*
 * One service in-process (runService) against the real NATS: what GET /metrics exposes after it
 * handled messages, and how the trace context of a consumed message reaches what it publishes.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const encoder = new TextEncoder();

const probe = { handled: 0, traceIds: [] as Array<string | undefined>, traceparents: new Map<string, string>() };

@Controller()
class ProbeController {
  constructor(@Inject(RUNTIME) private readonly runtime: ServiceRuntime) {}

  /** Poison on request; otherwise publish an "offer" from inside the handler, carrying the hop's trace on. */
  @EventPattern('{prefix}.in.*.result.*')
  async onResult(@Payload() data: { id: string; poison?: boolean }, @Ctx() ctx: JetStreamContext): Promise<void> {
    probe.handled++;
    if (data.poison) throw new PoisonError(`result ${data.id} is refused`, 'probe_refused');
    probe.traceIds.push(ctx.traceId);
    probe.traceparents.set(data.id, ctx.trace.traceparent);
    this.runtime.logger.child({ trace_id: ctx.traceId, event_id: data.id }).info('probe handled a result', { subject: ctx.subject });
    await this.runtime.nats.js.publish(`${this.runtime.config.BATON_PREFIX}.in.demo.offer.${data.id}`, encoder.encode('{}'), {
      msgID: `offer-${data.id}`,
      headers: headersFrom(hopTraceHeaders(ctx.trace)),
    });
  }
}

@Module({ controllers: [ProbeController] })
class ProbeModule {}

describe('observability of a service (runService, real NATS)', () => {
  const prefix = `ob${randomBytes(5).toString('hex')}`;
  let service: RunningService;
  let nats: NatsHandle;
  let base: string;
  const logs: string[] = [];
  let writeSpy: jest.SpyInstance;

  beforeAll(async () => {
    writeSpy = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      logs.push(String(chunk));
      return true;
    });
    service = await runService({
      service: 'probe',
      defaultPort: 0,
      imports: [ProbeModule],
      redis: false,
      env: { NATS_URL, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: 'info', BATON_MAX_DELIVER: '2' },
    });
    base = await service.app.getUrl();
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
  });

  afterAll(async () => {
    await service.stop();
    writeSpy.mockRestore();
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
    await nats.drain();
  });

  const publishResult = (id: string, body: object, headers?: Record<string, string>) => {
    const hdrs = natsHeaders();
    for (const [k, v] of Object.entries(headers ?? {})) hdrs.set(k, v);
    return nats.js.publish(`${prefix}.in.demo.result.coder`, encoder.encode(JSON.stringify({ id, ...body })), { msgID: id, headers: hdrs });
  };

  const offerHeaders = async (id: string) => {
    const msg = await nats.jsm.streams.getMessage(batonStreamNames(prefix).inbox, { last_by_subj: `${prefix}.in.demo.offer.${id}` });
    const out: Record<string, string[]> = {};
    for (const key of msg.header.keys()) out[key] = msg.header.values(key);
    return out;
  };

  it('GET /metrics exposes handled events by type and outcome, handler latency, dead letters, consumer lag and HTTP durations', async () => {
    const traceparent = newTraceparent();
    await publishResult('r1', {}, { traceparent });
    await publishResult('r2', {});
    await publishResult('r3', {});
    await publishResult('bad', { poison: true });
    for (let i = 0; i < 200 && probe.handled < 4; i++) await sleep(25);
    await sleep(100); // the last outcome is reported right after the handler
    expect((await fetch(`${base}/health/live`)).status).toBe(200);

    const response = await fetch(`${base}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain;.*version=0\.0\.4/);
    const text = await response.text();
    const handled = (outcome: string) => metricSample(text, 'baton_events_handled_total', { service: 'probe', type: 'in.result', outcome });
    expect(handled('acked')).toBe(3);
    expect(handled('dead_lettered')).toBe(1);
    expect(metricSample(text, 'baton_dead_letters_total', { service: 'probe', reason: 'probe_refused' })).toBe(1);
    expect(metricSample(text, 'baton_handler_duration_seconds_count', { service: 'probe', type: 'in.result' })).toBe(4);
    const pending = metricSample(text, 'baton_consumer_pending_messages', { service: 'probe', stream: batonStreamNames(prefix).inbox });
    expect(pending).toBeGreaterThanOrEqual(0);
    expect(metricSample(text, 'baton_consumer_redelivered_messages', { service: 'probe' })).toBe(0);
    expect(metricSample(text, 'baton_http_request_duration_seconds_count', { route: '/health/live', status_code: '200', method: 'GET' })).toBe(1);
    expect(text).toContain('baton_process_cpu_user_seconds_total');
  });

  it("a handler's hop trace continues the message's trace (same trace id, a new span id, the same for the whole handling), and a message without one starts a trace", async () => {
    const traceparent = newTraceparent();
    await publishResult('t1', {}, { traceparent });
    await publishResult('t2', {});
    for (let i = 0; i < 200; i++) {
      const have = await Promise.all(
        ['t1', 't2'].map((id) =>
          offerHeaders(id).then(
            () => true,
            () => false,
          ),
        ),
      );
      if (have.every(Boolean)) break;
      await sleep(25);
    }
    const parent = parseTraceparent(traceparent)!;
    const traced = await offerHeaders('t1');
    const child = parseTraceparent(traced['traceparent']?.[0])!;
    expect(child.traceId).toBe(parent.traceId);
    expect(child.spanId).not.toBe(parent.spanId);
    expect(traced['traceparent']?.[0]).toBe(probe.traceparents.get('t1'));
    const fresh = traceIdFromHeaders(await offerHeaders('t2'));
    expect(fresh).toMatch(/^[0-9a-f]{32}$/);
    expect(fresh).not.toBe(parent.traceId);
    expect(probe.traceIds).toContain(parent.traceId);
  });

  it('JSON log lines written inside a handler carry the trace id and the event id', () => {
    const lines = logs
      .join('')
      .split('\n')
      .filter((l) => l.includes('probe handled a result'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(line).toMatchObject({ service: 'probe', trace_id: expect.stringMatching(/^[0-9a-f]{32}$/), event_id: expect.any(String) });
  });
});
