import fc from 'fast-check';
import { AggregateKindSchema } from './envelope';
import { OperatorRelayNames, ServiceNames, type Principal } from './principal';
import {
  InboxKinds,
  RouterCommandNames,
  SubjectTable,
  SubjectTokenError,
  Subjects,
  isSubjectToken,
  parseSubject,
  type SubjectEntry,
  type SubjectName,
} from './subjects';
import { RESERVED_NAMES } from './common';

/** Names the contracts refuse (RESERVED_NAMES); fast-check proposes them on purpose. */
const notReserved = (name: string) => !(RESERVED_NAMES as readonly string[]).includes(name);

// Arbitraries for every kind of token, as the services accept them.
const prefixArb = fc.stringMatching(/^[a-z][a-z0-9_-]{0,31}$/);
const projectArb = fc.stringMatching(/^[a-z0-9][a-z0-9_-]{0,63}$/);
const agentArb = fc.stringMatching(/^[A-Za-z0-9_-]{1,128}$/).filter(notReserved);
const tokenArb = fc.string({ minLength: 1, maxLength: 40, unit: 'grapheme' }).filter(isSubjectToken);
const kindArb = fc.constantFrom(...AggregateKindSchema.options);
const principalArb: fc.Arbitrary<(project: string) => Principal> = fc.oneof(
  agentArb.map(
    (agent) =>
      (project: string): Principal => ({ kind: 'agent', project, agent }),
  ),
  fc.constantFrom(...ServiceNames).map((service) => (): Principal => ({ kind: 'svc', service })),
  fc.constantFrom(...OperatorRelayNames).map((relay) => (): Principal => ({ kind: 'op', relay })),
);

/** Valid tokens for every entry of the table. */
const tokensOf: { [N in SubjectName]: fc.Arbitrary<object> } = {
  event: fc.record({ project: projectArb, kind: kindArb, id: tokenArb }),
  runStart: fc.record({ project: projectArb }),
  agentRunStart: fc.record({ project: projectArb, agent: agentArb }),
  agentResult: fc.record({ project: projectArb, agent: agentArb }),
  sessionMessage: fc.record({ project: projectArb }),
  agentSessionMessage: fc.record({ project: projectArb, agent: agentArb }),
  operatorAnswer: fc.record({ project: projectArb }),
  stopRequest: fc.record({ project: projectArb }),
  offer: fc.record({ project: projectArb, agent: agentArb }),
  meshStart: fc.record({ project: projectArb }),
  agentMeshStart: fc.record({ project: projectArb, agent: agentArb }),
  meshResult: fc.record({ project: projectArb, agent: agentArb }),
  meshAnswer: fc.record({ project: projectArb }),
  ledgerCommand: fc.tuple(projectArb, principalArb, tokenArb).map(([project, principal, command]) => ({ project, principal: principal(project), command })),
  routerCommand: fc.record({ project: projectArb, command: fc.constantFrom(...RouterCommandNames) }),
  notice: fc.record({ project: projectArb }),
  deadLetter: fc.record({ source: tokenArb }),
};

const names = Object.keys(SubjectTable) as SubjectName[];
const entry = (name: SubjectName) => SubjectTable[name] as unknown as SubjectEntry<SubjectName, object>;

/** NATS subject matching (`*` one token, trailing `>` one or more). */
function matches(pattern: string, subject: string): boolean {
  const want = pattern.split('.');
  const have = subject.split('.');
  for (let i = 0; i < want.length; i++) {
    if (want[i] === '>') return have.length > i;
    if (i >= have.length || (want[i] !== '*' && want[i] !== have[i])) return false;
  }
  return want.length === have.length;
}

describe('the subject table', () => {
  it('has one entry per name, and every entry of a pattern starting with the prefix and its area', () => {
    for (const name of names) {
      expect(SubjectTable[name].name).toBe(name);
      expect(
        SubjectTable[name].pattern.startsWith(`{prefix}.${SubjectTable[name].area}.`) ||
          SubjectTable[name].pattern === `{prefix}.${SubjectTable[name].area}.{project}`,
      ).toBe(true);
    }
    expect([...new Set(names.filter((n) => SubjectTable[n].area === 'in').map((n) => SubjectTable[n].inboxKind))].sort()).toEqual([...InboxKinds].sort());
  });

  it('writes the subjects the README and docs/identity.md list', () => {
    const p = 'baton';
    expect(SubjectTable.event.build(p, { project: 'acme', kind: 'run', id: 'wr-1' })).toBe('baton.ev.acme.run.wr-1');
    expect(SubjectTable.agentResult.build(p, { project: 'acme', agent: 'support' })).toBe('baton.in.acme.result.support');
    expect(SubjectTable.runStart.build(p, { project: 'acme' })).toBe('baton.in.acme.start');
    expect(SubjectTable.agentRunStart.build(p, { project: 'acme', agent: 'intake' })).toBe('baton.in.acme.start.intake');
    expect(SubjectTable.agentMeshStart.build(p, { project: 'acme', agent: 'intake' })).toBe('baton.in.acme.mesh_start.intake');
    expect(SubjectTable.agentSessionMessage.build(p, { project: 'acme', agent: 'chat' })).toBe('baton.in.acme.message.chat');
    expect(SubjectTable.sessionMessage.build(p, { project: 'acme' })).toBe('baton.in.acme.message');
    expect(SubjectTable.operatorAnswer.build(p, { project: 'acme' })).toBe('baton.in.acme.answer');
    expect(SubjectTable.stopRequest.build(p, { project: 'acme' })).toBe('baton.in.acme.stop');
    expect(SubjectTable.offer.build(p, { project: 'acme', agent: 'builder' })).toBe('baton.in.acme.offer.builder');
    expect(SubjectTable.meshStart.build(p, { project: 'acme' })).toBe('baton.in.acme.mesh_start');
    expect(SubjectTable.meshResult.build(p, { project: 'acme', agent: 'triage' })).toBe('baton.in.acme.mesh_result.triage');
    expect(SubjectTable.meshAnswer.build(p, { project: 'acme' })).toBe('baton.in.acme.mesh_answer');
    expect(SubjectTable.ledgerCommand.build(p, { project: 'acme', principal: { kind: 'agent', project: 'acme', agent: 'builder' }, command: 'claim' })).toBe(
      'baton.cmd.ledger.acme.agent.builder.claim',
    );
    expect(SubjectTable.routerCommand.build(p, { project: 'acme', command: 'publish_definition' })).toBe('baton.cmd.router.acme.publish_definition');
    expect(SubjectTable.notice.build(p, { project: 'acme' })).toBe('baton.notice.acme');
    expect(SubjectTable.deadLetter.build(p, { source: 'router_in' })).toBe('baton.dlq.router_in');
  });

  it.each(names)('%s: parse ∘ build is the identity, and parseSubject names the entry', (name) => {
    fc.assert(
      fc.property(prefixArb, tokensOf[name], (prefix, tokens) => {
        const subject = entry(name).build(prefix, tokens);
        expect(entry(name).parse(prefix, subject)).toEqual(tokens);
        expect(parseSubject(prefix, subject)).toEqual({ name, ...tokens });
        // No other entry claims it.
        for (const other of names) if (other !== name) expect(entry(other).parse(prefix, subject)).toBeNull();
        // The unchecked formatter agrees, and the entry's filter matches it.
        const formatted = entry(name).format(prefix, tokens as Record<string, string>);
        if (name === 'ledgerCommand')
          expect(matches(formatted, subject)).toBe(true); // the principal is not a string token
        else expect(formatted).toBe(subject);
        expect(matches(entry(name).format(prefix), subject)).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it.each(names)('%s: refuses another prefix, an extra token, a missing token and wildcards', (name) => {
    fc.assert(
      fc.property(prefixArb, prefixArb, tokensOf[name], fc.constantFrom('*', '>'), fc.nat(), (prefix, other, tokens, wildcard, at) => {
        const subject = entry(name).build(prefix, tokens);
        if (other !== prefix) {
          expect(entry(name).parse(other, subject)).toBeNull();
          expect(parseSubject(other, subject)).toBeNull();
        }
        expect(entry(name).parse(prefix, `${subject}.extra`)).toBeNull();
        expect(entry(name).parse(prefix, subject.split('.').slice(0, -1).join('.'))).toBeNull();
        const parts = subject.split('.');
        const i = 1 + (at % (parts.length - 1));
        parts[i] = wildcard;
        const wild = parts.join('.');
        expect(entry(name).parse(prefix, wild)).toBeNull();
        expect(parseSubject(prefix, wild)).toBeNull();
        expect(parseSubject(prefix, subject.replace(/\.[^.]*$/, '.'))).toBeNull(); // an empty token
      }),
      { numRuns: 100 },
    );
  });

  it('build refuses a token its parse would refuse', () => {
    for (const project of ['', 'a.b', '*', '>', 'Acme', 'with space']) {
      expect(() => SubjectTable.runStart.build('baton', { project })).toThrow(SubjectTokenError);
      expect(() => SubjectTable.agentResult.build('baton', { project, agent: 'a' })).toThrow(SubjectTokenError);
    }
    for (const agent of ['', 'a.b', '*', 'x>', 'ag ent', 'agent:1'])
      expect(() => SubjectTable.offer.build('baton', { project: 'p', agent })).toThrow(SubjectTokenError);
    expect(() => SubjectTable.event.build('baton', { project: 'p', kind: 'nope' as never, id: 'x' })).toThrow(SubjectTokenError);
    expect(() => SubjectTable.event.build('baton', { project: 'p', kind: 'run', id: 'a.b' })).toThrow(SubjectTokenError);
    expect(() => SubjectTable.routerCommand.build('baton', { project: 'p', command: 'drop_tables' as never })).toThrow(SubjectTokenError);
    expect(() => SubjectTable.deadLetter.build('baton', { source: '>' })).toThrow(SubjectTokenError);
    expect(() => SubjectTable.notice.build('ba.ton', { project: 'p' })).toThrow(SubjectTokenError);
    expect(() => SubjectTable.ledgerCommand.build('baton', { project: 'p', principal: { kind: 'agent', project: 'p', agent: 'a' }, command: '*' })).toThrow(
      SubjectTokenError,
    );
    expect(() =>
      SubjectTable.ledgerCommand.build('baton', { project: 'p', principal: { kind: 'agent', project: 'p', agent: 'a.b' }, command: 'claim' }),
    ).toThrow(/principal/);
  });

  it('recognises subjects under the prefix that no entry describes as unknown, with their area', () => {
    expect(parseSubject('baton', 'baton.in.acme.bogus')).toEqual({ name: 'unknown', area: 'in' });
    expect(parseSubject('baton', 'baton.in.acme.result')).toEqual({ name: 'unknown', area: 'in' });
    expect(parseSubject('baton', 'baton.in.acme.start.intake')).toEqual({ name: 'agentRunStart', project: 'acme', agent: 'intake' });
    expect(parseSubject('baton', 'baton.in.acme.start.intake.extra')).toEqual({ name: 'unknown', area: 'in' });
    expect(parseSubject('baton', 'baton.in.acme.start.Bad_Agent!')).toEqual({ name: 'unknown', area: 'in' });
    expect(parseSubject('baton', 'baton.in.Acme.start')).toEqual({ name: 'unknown', area: 'in' });
    expect(parseSubject('baton', 'baton.ev.acme.invoice.1')).toEqual({ name: 'unknown', area: 'ev' });
    expect(parseSubject('baton', 'baton.cmd.router.acme.drop_tables')).toEqual({ name: 'unknown', area: 'cmd' });
    expect(parseSubject('baton', 'baton.cmd.ledger.acme.agent.a')).toEqual({ name: 'unknown', area: 'cmd' });
    expect(parseSubject('baton', 'baton.cmd.ledger.acme.svc.nobody.claim')).toEqual({ name: 'unknown', area: 'cmd' });
    expect(parseSubject('baton', 'baton.whatever.x')).toEqual({ name: 'unknown', area: 'whatever' });
    expect(parseSubject('baton', 'baton')).toBeNull();
    expect(parseSubject('baton', 'other.in.acme.start')).toBeNull();
    expect(parseSubject('baton', 'baton.in.*.start')).toBeNull();
    expect(parseSubject('baton', 'baton.dlq.>')).toBeNull();
    expect(parseSubject('baton', '_INBOX_baton.agent.acme.a.x')).toBeNull();
  });

  it('keeps the Subjects helpers: the same subjects, and filters with *', () => {
    expect(Subjects.agentResult('baton', 'acme', 'support')).toBe('baton.in.acme.result.support');
    expect(Subjects.aggregate('baton', 'acme', 'handoff', 'h-1')).toBe('baton.ev.acme.handoff.h-1');
    expect(Subjects.aggregateKind('baton', 'definition')).toBe('baton.ev.*.definition.*');
    expect(Subjects.aggregate('baton', 'acme', 'run', '*')).toBe('baton.ev.acme.run.*');
    expect(Subjects.offer('baton', 'acme', '*')).toBe('baton.in.acme.offer.*');
    expect(Subjects.agentResults('baton')).toBe('baton.in.*.result.*');
    expect(Subjects.sessionMessages('baton')).toBe('baton.in.*.message');
    expect(Subjects.operatorAnswers('baton')).toBe('baton.in.*.answer');
    expect(Subjects.meshStarts('baton')).toBe('baton.in.*.mesh_start');
    expect(Subjects.meshResults('baton')).toBe('baton.in.*.mesh_result.*');
    expect(Subjects.meshAnswers('baton')).toBe('baton.in.*.mesh_answer');
    expect(Subjects.ledgerCommands('baton')).toBe('baton.cmd.ledger.>');
    expect(Subjects.routerCommand('baton', 'acme', 'publish_definition')).toBe('baton.cmd.router.acme.publish_definition');
    expect(Subjects.notice('baton', 'acme')).toBe('baton.notice.acme');
    expect(Subjects.deadLetter('baton', 'src')).toBe('baton.dlq.src');
    expect(Subjects.deadLetters('baton')).toBe('baton.dlq.>');
    expect(Subjects.events('baton')).toBe('baton.ev.>');
    expect(SubjectTable.ledgerCommand.format('baton', { project: 'acme' })).toBe('baton.cmd.ledger.acme.*.*.*');
  });
});
