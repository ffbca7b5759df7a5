import 'reflect-metadata';
import { PATTERN_EXTRAS_METADATA, PATTERN_HANDLER_METADATA, PATTERN_METADATA } from '@nestjs/microservices/constants';
import { checkRedriveTarget, durableNameFor, LEGACY_DLQ_SOURCES, redriveTable, ROUTER_DLQ_SOURCES, ROUTER_INBOX_CONSUMERS } from '@baton/eventstore';
import { DefinitionsController } from '../definitions/definitions.controller';
import { DispatchController } from '../dispatch/dispatch.controller';
import { HandoffDeadlineController } from '../dispatch/handoff-deadline.controller';
import { MeshesController } from '../meshes/meshes.controller';
import { RunsController } from '../runs/runs.controller';

/** Every `@EventPattern` the router's controllers declare, as written in the decorators, with its extras. */
function declaredEventConsumers(): Array<{ pattern: string; extras: { dlqSource?: string; durable?: string } }> {
  const consumers: Array<{ pattern: string; extras: { dlqSource?: string; durable?: string } }> = [];
  for (const controller of [RunsController, MeshesController, DispatchController, HandoffDeadlineController, DefinitionsController]) {
    const proto = controller.prototype as unknown as Record<string, unknown>;
    for (const name of Object.getOwnPropertyNames(proto)) {
      const method = proto[name];
      if (typeof method !== 'function') continue;
      const kind = Reflect.getMetadata(PATTERN_HANDLER_METADATA, method) as number | undefined;
      const declared = Reflect.getMetadata(PATTERN_METADATA, method) as unknown[] | undefined;
      const extras = (Reflect.getMetadata(PATTERN_EXTRAS_METADATA, method) ?? {}) as { dlqSource?: string; durable?: string };
      if (kind === 2 && declared) consumers.push(...declared.map((pattern) => ({ pattern: String(pattern), extras })));
    }
  }
  return consumers;
}

function declaredEventPatterns(): string[] {
  return declaredEventConsumers().map((c) => c.pattern);
}

describe('the redrive table agrees with the consumers the router declares', () => {
  const inbox = declaredEventPatterns().filter((p) => p.startsWith('{prefix}.in.'));
  const answers = ['{prefix}.in.*.answer', '{prefix}.in.*.mesh_answer'];

  it('every consumer of the router dead-letters under its readable source (router-results…), and keeps its derived durable', () => {
    const consumers = declaredEventConsumers();
    expect(consumers.length).toBeGreaterThanOrEqual(11);
    for (const { pattern, extras } of consumers) {
      expect(extras.dlqSource).toBe(ROUTER_DLQ_SOURCES[pattern]);
      expect(extras.dlqSource).toMatch(/^router-[a-z-]+$/);
      // Renaming a durable would re-create it and re-read its stream: the router never names one.
      expect(extras.durable).toBeUndefined();
      // Letters the consumer wrote before readable names carried its durable name; they still count as its.
      expect(LEGACY_DLQ_SOURCES[durableNameFor('router', pattern)]).toBe(extras.dlqSource);
    }
    expect(new Set(consumers.map((c) => c.extras.dlqSource)).size).toBe(consumers.length);
    expect(ROUTER_DLQ_SOURCES['{prefix}.in.*.result.*']).toBe('router-results');
  });

  it('every inbox consumer of the router is a redrive source for exactly its pattern, under its readable source and its durable name; operator answers excepted', () => {
    expect(inbox.length).toBeGreaterThan(0);
    expect([...inbox.filter((p) => !answers.includes(p))].sort()).toEqual(ROUTER_INBOX_CONSUMERS.map((c) => c.pattern).sort());
    expect(inbox).toEqual(expect.arrayContaining(answers));
    const table = redriveTable('baton');
    for (const pattern of inbox.filter((p) => !answers.includes(p))) {
      const subjects = [pattern.replace('{prefix}', 'baton')];
      expect(table).toContainEqual({ source: ROUTER_DLQ_SOURCES[pattern], subjects });
      expect(table).toContainEqual({ source: durableNameFor('router', pattern), subjects });
      expect(ROUTER_INBOX_CONSUMERS.find((c) => c.pattern === pattern)?.source).toBe(ROUTER_DLQ_SOURCES[pattern]);
    }
  });

  it('letters of the router’s answer and event consumers are never redriven, under either name', () => {
    const never = declaredEventPatterns().filter((p) => answers.includes(p) || p.startsWith('{prefix}.ev.'));
    expect(never.length).toBeGreaterThanOrEqual(answers.length + 3); // run, handoff and mesh events
    for (const pattern of never) {
      for (const source of [durableNameFor('router', pattern), ROUTER_DLQ_SOURCES[pattern]!]) {
        const subject = pattern.replace('{prefix}', 'baton').replace(/\*/g, 'x');
        expect(checkRedriveTarget('baton', { source, subject, dlqSubject: `baton.dlq.${source}`, originalStream: 'BATON_INBOX' })).toMatchObject({ ok: false });
      }
    }
  });
});
