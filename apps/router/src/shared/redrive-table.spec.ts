import 'reflect-metadata';
import { PATTERN_HANDLER_METADATA, PATTERN_METADATA } from '@nestjs/microservices/constants';
import { checkRedriveTarget, durableNameFor, redriveTable, ROUTER_INBOX_CONSUMERS } from '@baton/eventstore';
import { DefinitionsController } from '../definitions/definitions.controller';
import { DispatchController } from '../dispatch/dispatch.controller';
import { HandoffDeadlineController } from '../dispatch/handoff-deadline.controller';
import { MeshesController } from '../meshes/meshes.controller';
import { RunsController } from '../runs/runs.controller';

/** Every `@EventPattern` the router's controllers declare, as written in the decorators. */
function declaredEventPatterns(): string[] {
  const patterns: string[] = [];
  for (const controller of [RunsController, MeshesController, DispatchController, HandoffDeadlineController, DefinitionsController]) {
    const proto = controller.prototype as unknown as Record<string, unknown>;
    for (const name of Object.getOwnPropertyNames(proto)) {
      const method = proto[name];
      if (typeof method !== 'function') continue;
      const kind = Reflect.getMetadata(PATTERN_HANDLER_METADATA, method) as number | undefined;
      const declared = Reflect.getMetadata(PATTERN_METADATA, method) as unknown[] | undefined;
      if (kind === 2 && declared) patterns.push(...declared.map(String));
    }
  }
  return patterns;
}

describe('the redrive table agrees with the consumers the router declares', () => {
  const inbox = declaredEventPatterns().filter((p) => p.startsWith('{prefix}.in.'));
  const answers = ['{prefix}.in.*.answer', '{prefix}.in.*.mesh_answer'];

  it('every inbox consumer of the router is a redrive source for exactly its pattern, operator answers excepted', () => {
    expect(inbox.length).toBeGreaterThan(0);
    expect([...inbox.filter((p) => !answers.includes(p))].sort()).toEqual(ROUTER_INBOX_CONSUMERS.map((c) => c.pattern).sort());
    expect(inbox).toEqual(expect.arrayContaining(answers));
    const table = redriveTable('baton');
    for (const pattern of inbox.filter((p) => !answers.includes(p))) {
      expect(table).toContainEqual({ source: durableNameFor('router', pattern), subjects: [pattern.replace('{prefix}', 'baton')] });
    }
  });

  it('letters of the router’s answer and event consumers are never redriven', () => {
    const never = declaredEventPatterns().filter((p) => answers.includes(p) || p.startsWith('{prefix}.ev.'));
    expect(never.length).toBeGreaterThanOrEqual(answers.length + 3); // run, handoff and mesh events
    for (const pattern of never) {
      const source = durableNameFor('router', pattern);
      const subject = pattern.replace('{prefix}', 'baton').replace(/\*/g, 'x');
      expect(checkRedriveTarget('baton', { source, subject, dlqSubject: `baton.dlq.${source}`, originalStream: 'BATON_INBOX' })).toMatchObject({ ok: false });
    }
  });
});
