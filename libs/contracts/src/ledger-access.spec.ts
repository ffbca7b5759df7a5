import {
  LedgerCommandAccess,
  LedgerCommandSchemas,
  describeAccess,
  isLedgerCommand,
  mayIssue,
  onBehalfOfRefusal,
  resolveLedgerCaller,
  splitIdentityClaims,
  type LedgerCommandName,
} from './ledger-access';
import { HandoffCommandSchemas } from './handoff';
import { Principals, ledgerCommandSenderOf, ledgerCommandSubject, parseLedgerCommandSubject, type OperatorRole, type Principal } from './principal';

const agent = Principals.agent('acme', 'bob');
const router = Principals.service('router');
const watchdog = Principals.service('watchdog');
const notifier = Principals.operator('notifier');
const admin = Principals.operator('admin');

const COMMANDS = Object.keys(LedgerCommandAccess) as LedgerCommandName[];

/** Who may send `command`, as the list of senders the table admits. */
function senders(command: LedgerCommandName): string[] {
  const out: string[] = [];
  const asks: Array<[string, Principal, OperatorRole | undefined]> = [
    ['agent', agent, undefined],
    ['svc.router', router, undefined],
    ['svc.watchdog', watchdog, undefined],
    ['svc.ledger', Principals.service('ledger'), undefined],
    ['svc.notifier', Principals.service('notifier'), undefined],
    ['op.notifier:viewer', notifier, 'viewer'],
    ['op.notifier:operator', notifier, 'operator'],
    ['op.notifier:admin', notifier, 'admin'],
    ['op.admin', admin, 'admin'],
  ];
  for (const [name, principal, role] of asks) if (mayIssue(command, { principal, ...(role ? { role } : {}) })) out.push(name);
  return out;
}

describe('ledger command table: who may send what (issue 11)', () => {
  it('covers every command the ledger serves: the handoff commands, pause, resume, open_offers and complete_then_create', () => {
    expect(COMMANDS.sort()).toEqual(Object.keys(LedgerCommandSchemas).sort());
    for (const name of Object.keys(HandoffCommandSchemas)) expect(isLedgerCommand(name)).toBe(true);
    for (const name of ['pause', 'resume', 'open_offers', 'complete_then_create']) expect(isLedgerCommand(name)).toBe(true);
    expect(isLedgerCommand('explode')).toBe(false);
    expect(isLedgerCommand('__proto__')).toBe(false);
  });

  it.each([
    ['complete_from_result', ['svc.router']],
    ['complete_then_create', ['svc.router']],
    ['requeue_expired', ['svc.watchdog']],
    ['expire_deadline', ['svc.watchdog']],
    ['pause', ['op.notifier:admin', 'op.admin']],
    ['resume', ['op.notifier:admin', 'op.admin']],
    ['create', ['agent', 'svc.router']],
    ['open_offers', ['agent']],
    ['give_up_offer', ['agent']],
  ] as Array<[LedgerCommandName, string[]]>)('%s → %j only', (command, expected) => {
    expect(senders(command)).toEqual(expected);
  });

  it.each(['claim', 'heartbeat', 'return', 'release', 'fail', 'archive', 'decide_handback'] as LedgerCommandName[])(
    '%s: agents and people who may answer (the domain then checks claimer, addressee, delegator); never a viewer, never a service',
    (command) => {
      expect(senders(command)).toEqual(['agent', 'op.notifier:operator', 'op.notifier:admin', 'op.admin']);
    },
  );

  it('abandon: agents and people who may answer, and the router (the handoff of a run stopped from outside); no other service, never a viewer', () => {
    const sends = senders('abandon');
    expect(sends).toEqual(expect.arrayContaining(['agent', 'op.notifier:operator', 'op.notifier:admin', 'op.admin', 'svc.router']));
    expect(sends).toHaveLength(5);
  });

  it('an op.notifier caller without a role may send nothing', () => {
    for (const command of COMMANDS) expect(mayIssue(command, { principal: notifier })).toBe(false);
  });

  it('describes each rule for docs and refusal messages', () => {
    expect(describeAccess('complete_from_result')).toBe('svc.router');
    expect(describeAccess('pause')).toBe('op.notifier (role admin), op.admin');
    expect(describeAccess('claim')).toBe("the project's agents, op.notifier (role operator | admin), op.admin");
  });
});

describe('the caller comes from the subject; the body may only repeat it', () => {
  it('an agent is its subject name, kind agent; repeating its own name and kind is fine', () => {
    expect(resolveLedgerCaller(agent, {})).toEqual({ ok: true, caller: { principal: agent, actor: 'bob', kind: 'agent' } });
    expect(resolveLedgerCaller(agent, { actor: 'bob', actor_kind: 'agent' })).toMatchObject({ ok: true, caller: { actor: 'bob', kind: 'agent' } });
  });

  it.each([
    ['another actor', { actor: 'alice' }, 'actor'],
    ['kind operator', { actor_kind: 'operator' }, 'actor_kind'],
    ['kind system', { actor: 'bob', actor_kind: 'system' }, 'actor_kind'],
    ['role admin', { actor_role: 'admin' }, 'actor_role'],
    ['role agent', { actor_role: 'agent' }, 'actor_role'],
    ['a non-string actor', { actor: 42 }, 'actor'],
    ['a null actor', { actor: null }, 'actor'],
  ])('an agent body claiming %s → identity_mismatch', (_what, claims, path) => {
    expect(resolveLedgerCaller(agent, claims)).toMatchObject({ ok: false, code: 'identity_mismatch', path });
  });

  it('services are their service actors: the router baton-router (system), the watchdog baton-watchdog (watchdog); nothing else', () => {
    expect(resolveLedgerCaller(router, {})).toMatchObject({ ok: true, caller: { actor: 'baton-router', kind: 'system' } });
    expect(resolveLedgerCaller(watchdog, {})).toMatchObject({ ok: true, caller: { actor: 'baton-watchdog', kind: 'watchdog' } });
    expect(resolveLedgerCaller(router, { actor: 'baton-router', actor_kind: 'system' })).toMatchObject({ ok: true });
    expect(resolveLedgerCaller(router, { actor: 'alice', actor_kind: 'agent' })).toMatchObject({ ok: false, code: 'identity_mismatch' });
    expect(resolveLedgerCaller(watchdog, { actor_kind: 'operator' })).toMatchObject({ ok: false, code: 'identity_mismatch' });
    expect(resolveLedgerCaller(watchdog, { actor_role: 'admin' })).toMatchObject({ ok: false, code: 'identity_mismatch' });
  });

  it('op.notifier names the operator and the token role (both required), kind operator', () => {
    expect(resolveLedgerCaller(notifier, { actor: 'olga', actor_role: 'operator' })).toEqual({
      ok: true,
      caller: { principal: notifier, actor: 'olga', kind: 'operator', role: 'operator' },
    });
    expect(resolveLedgerCaller(notifier, { actor: 'olga', actor_role: 'admin', actor_kind: 'operator' })).toMatchObject({
      ok: true,
      caller: { role: 'admin' },
    });
    expect(resolveLedgerCaller(notifier, { actor_role: 'admin' })).toMatchObject({ ok: false, code: 'schema_violation', path: 'actor' });
    expect(resolveLedgerCaller(notifier, { actor: 'olga' })).toMatchObject({ ok: false, code: 'schema_violation', path: 'actor_role' });
    expect(resolveLedgerCaller(notifier, { actor: 'olga', actor_role: 'agent' })).toMatchObject({ ok: false, code: 'schema_violation', path: 'actor_role' });
    expect(resolveLedgerCaller(notifier, { actor: 'has space', actor_role: 'admin' })).toMatchObject({ ok: false, code: 'schema_violation', path: 'actor' });
    expect(resolveLedgerCaller(notifier, { actor: 'olga', actor_role: 'admin', actor_kind: 'system' })).toMatchObject({
      ok: false,
      code: 'identity_mismatch',
      path: 'actor_kind',
    });
  });

  it('op.admin is admin by its connection and the actor: the person the body names is on_behalf_of (a claim), never the actor; never another role or kind', () => {
    expect(resolveLedgerCaller(admin, {})).toEqual({ ok: true, caller: { principal: admin, actor: 'admin', kind: 'operator', role: 'admin' } });
    expect(resolveLedgerCaller(admin, { actor: 'sam', actor_role: 'admin' })).toEqual({
      ok: true,
      caller: { principal: admin, actor: 'admin', kind: 'operator', role: 'admin', on_behalf_of: 'sam' },
    });
    // Naming the connection itself claims nobody else.
    expect(resolveLedgerCaller(admin, { actor: 'admin' })).toEqual({ ok: true, caller: { principal: admin, actor: 'admin', kind: 'operator', role: 'admin' } });
    expect(resolveLedgerCaller(admin, { actor: 'has space' })).toMatchObject({ ok: false, code: 'schema_violation', path: 'actor' });
    expect(resolveLedgerCaller(admin, { actor_role: 'viewer' })).toMatchObject({ ok: false, code: 'identity_mismatch', path: 'actor_role' });
    expect(resolveLedgerCaller(admin, { actor_kind: 'watchdog' })).toMatchObject({ ok: false, code: 'identity_mismatch', path: 'actor_kind' });
  });

  it('a person op.admin names is kept only on pause and resume (on_behalf_of); on any other command it is refused identity_mismatch', () => {
    const named = { on_behalf_of: 'sam' };
    for (const command of COMMANDS) {
      const refusal = onBehalfOfRefusal(command, named);
      if (command === 'pause' || command === 'resume') expect({ command, refusal }).toEqual({ command, refusal: null });
      else expect({ command, refusal }).toMatchObject({ command, refusal: { ok: false, code: 'identity_mismatch', path: 'actor' } });
      expect(onBehalfOfRefusal(command, {})).toBeNull();
    }
  });

  it('splitIdentityClaims takes the three claim keys out of the body and leaves the command', () => {
    expect(splitIdentityClaims({ handoff_id: 'h', actor: 'a', actor_kind: 'agent', actor_role: 'x', idempotency_key: 'k' })).toEqual({
      claims: { actor: 'a', actor_kind: 'agent', actor_role: 'x' },
      command: { handoff_id: 'h', idempotency_key: 'k' },
    });
  });

  it('the subject round-trips: ledgerCommandSubject → parseLedgerCommandSubject', () => {
    for (const principal of [agent, router, watchdog, notifier, admin]) {
      const subject = ledgerCommandSubject('baton', 'acme', principal, 'claim');
      expect(parseLedgerCommandSubject('baton', subject)).toEqual({ project: 'acme', principal, command: 'claim' });
    }
    expect(ledgerCommandSubject('baton', 'acme', agent, 'claim')).toBe('baton.cmd.ledger.acme.agent.bob.claim');
    expect(parseLedgerCommandSubject('baton', 'baton.cmd.ledger.acme.claim')).toBeNull();
    expect(parseLedgerCommandSubject('baton', 'baton.cmd.ledger.acme.svc.nobody.claim')).toBeNull();
    expect(parseLedgerCommandSubject('baton', 'baton.cmd.ledger.acme.op.router.claim')).toBeNull();
  });

  it('a rejected command is charged to the principal its subject names, or to whatever the subject holds when it names none', () => {
    expect(ledgerCommandSenderOf('baton', ledgerCommandSubject('baton', 'acme', agent, 'claim'))).toBe('acme/agent.bob');
    expect(ledgerCommandSenderOf('baton', ledgerCommandSubject('baton', 'acme', router, 'complete'))).toBe('acme/svc.router');
    expect(ledgerCommandSenderOf('baton', 'baton.cmd.ledger.acme.svc.nobody.claim')).toBe('acme.svc.nobody.claim');
    expect(ledgerCommandSenderOf('baton', 'baton.cmd.ledger.acme.claim')).toBe('acme.claim');
  });
});
