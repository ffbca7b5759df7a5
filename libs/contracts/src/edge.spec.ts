import { edgeAckSubject, edgeApiPrefix, edgeBodyRefusal, edgeSubjectOf, mayRelayReply, parseEdgeSubject, type EdgeRoute } from './edge';
import { offerDurableName } from './principal';

const INBOX = 'BATON_INBOX';
const durable = offerDurableName('acme', 'support');

describe('the agent edge: what each edge subject stands for', () => {
  it('relays an agent`s inbox kinds to the in subject they stand for, and nothing else of the inbox', () => {
    for (const rest of ['result.support', 'mesh_result.support', 'start', 'start.support', 'message', 'message.support', 'mesh_start', 'mesh_start.support']) {
      const route = parseEdgeSubject('baton', `baton.edge.acme.${rest}`, INBOX);
      const agent = rest.includes('.') ? 'support' : null;
      expect(route).toEqual({ kind: 'input', project: 'acme', agent, target: `baton.in.acme.${rest}`, sender: agent === null ? 'acme' : 'acme/support' });
    }
    for (const rest of ['answer', 'mesh_answer', 'stop', 'offer.support', 'result', 'nonsense', 'result.support.extra']) {
      expect({ rest, route: parseEdgeSubject('baton', `baton.edge.acme.${rest}`, INBOX) }).toEqual({
        rest,
        route: { refused: expect.any(String), sender: expect.any(String) },
      });
    }
    expect(parseEdgeSubject('baton', 'other.edge.acme.result.support', INBOX)).toEqual({ refused: expect.any(String), sender: expect.any(String) });
    expect(edgeSubjectOf('baton', 'baton.in.acme.result.support')).toBe('baton.edge.acme.result.support');
  });

  it('relays only the agent`s own offers durable: its pulls, its info, its acknowledgements (in the form nats-server 2.9 writes)', () => {
    const api = edgeApiPrefix('baton', 'acme', 'support');
    expect(parseEdgeSubject('baton', `${api}.CONSUMER.MSG.NEXT.${INBOX}.${durable}`, INBOX)).toEqual({
      kind: 'api',
      project: 'acme',
      agent: 'support',
      target: `$JS.API.CONSUMER.MSG.NEXT.${INBOX}.${durable}`,
      sender: 'acme/support',
    });
    expect(parseEdgeSubject('baton', `${api}.CONSUMER.INFO.${INBOX}.${durable}`, INBOX)).toMatchObject({
      kind: 'api',
      target: `$JS.API.CONSUMER.INFO.${INBOX}.${durable}`,
    });
    const ack = `$JS.ACK.${INBOX}.${durable}.1.20.3.1796482419179772271.0`;
    expect(parseEdgeSubject('baton', edgeAckSubject('baton', 'acme', 'support', ack), INBOX)).toEqual({
      kind: 'ack',
      project: 'acme',
      agent: 'support',
      target: ack,
      sender: 'acme/support',
      ack: { stream: INBOX, consumer: durable, deliveries: 1, streamSeq: 20 },
    });
    // The longer form is refused: a server routes an ack on the tokens it reads, and a subject whose
    // later tokens name the agent's durable could start with another's.
    const v2 = `$JS.ACK.hub.ACCHASH.${INBOX}.${durable}.1.20.3.1796482419179772271.0.rnd`;
    expect(parseEdgeSubject('baton', edgeAckSubject('baton', 'acme', 'support', v2), INBOX)).toEqual({
      refused: expect.any(String),
      sender: expect.any(String),
    });
    const smuggled = `$JS.ACK.${INBOX}.${offerDurableName('globex', 'support')}.${INBOX}.${durable}.1.1.1.1.1`;
    expect(parseEdgeSubject('baton', edgeAckSubject('baton', 'acme', 'support', smuggled), INBOX)).toEqual({
      refused: expect.any(String),
      sender: expect.any(String),
    });
    for (const subject of [
      `${api}.STREAM.DELETE.${INBOX}`,
      `${api}.STREAM.PURGE.${INBOX}`,
      `${api}.CONSUMER.DELETE.${INBOX}.${durable}`,
      `${api}.CONSUMER.MSG.NEXT.${INBOX}.${offerDurableName('acme', 'billing')}`,
      `${api}.CONSUMER.MSG.NEXT.BATON_EVENTS.${durable}`,
      `baton.edge.acme.offers.support.ack.${INBOX}.router-results.1.20.3.1.0`,
      `baton.edge.acme.offers.support.ack.BATON_EVENTS.${durable}.1.20.3.1.0`,
      `baton.edge.acme.offers.support.other.x.y`,
    ]) {
      expect({ subject, route: parseEdgeSubject('baton', subject, INBOX) }).toEqual({
        subject,
        route: { refused: expect.any(String), sender: expect.any(String) },
      });
    }
  });

  it('names the sender of a refused subject too: the project and agent its tokens hold, the budget its refusals count against', () => {
    const sender = (subject: string) => parseEdgeSubject('p', subject, INBOX).sender;
    expect(sender('p.edge.acme.result.bob.extra')).toBe('acme/bob');
    expect(sender('p.edge.acme.offers.bob.api.STREAM.DELETE.X')).toBe('acme/bob');
    expect(sender('p.edge.acme.offers.bob.ack.S.D.1.1.1.1.0')).toBe('acme/bob');
    expect(sender('p.edge.acme.nonsense')).toBe('acme');
    expect(sender('p.edge.acme')).toBe('acme');
    expect(parseEdgeSubject('p', 'p.edge.acme.offers.bob.ack.S.D.1.1.1.1.0', INBOX)).toHaveProperty('refused');
  });

  it('relays a reply only to the sender`s own inbox (on a shared subject: an inbox of an agent of the project)', () => {
    const own = { kind: 'input', project: 'acme', agent: 'support', target: 'baton.in.acme.result.support', sender: 'acme/support' } as const;
    expect(mayRelayReply('baton', own, '_INBOX_baton.agent.acme.support.abc.1')).toBe(true);
    for (const reply of [
      '$JS.API.STREAM.DELETE.BATON_EVENTS',
      'baton.ev.globex.run.r1',
      'baton.in.globex.answer',
      '_INBOX.x',
      '_INBOX_baton.agent.acme.billing.x',
      '_INBOX_baton.agent.acme.support',
    ]) {
      expect({ reply, allowed: mayRelayReply('baton', own, reply) }).toEqual({ reply, allowed: false });
    }
    // A wildcard or an empty token is no reply subject (nats-server 2.9.10 crashed answering a JetStream call on one).
    for (const reply of [
      '_INBOX_baton.agent.acme.support.>',
      '_INBOX_baton.agent.acme.support.*',
      '_INBOX_baton.agent.acme.support..x',
      '_INBOX_baton.agent.acme.support.a b',
    ]) {
      expect({ reply, allowed: mayRelayReply('baton', own, reply) }).toEqual({ reply, allowed: false });
    }
    const shared = { kind: 'input', project: 'acme', agent: null, target: 'baton.in.acme.start', sender: 'acme' } as const;
    expect(mayRelayReply('baton', shared, '_INBOX_baton.agent.acme.*.x')).toBe(false);
    expect(mayRelayReply('baton', shared, '_INBOX_baton.agent.acme.billing')).toBe(false);
    expect(mayRelayReply('baton', shared, '_INBOX_baton.agent.acme.billing.x')).toBe(true);
    expect(mayRelayReply('baton', shared, '_INBOX_baton.agent.globex.billing.x')).toBe(false);
    expect(mayRelayReply('baton', shared, '_INBOX_baton.svc.router.x')).toBe(false);
  });

  it('relays only the bodies an agent needs: bounded pulls, an empty info request, the four acknowledgements', () => {
    const api = edgeApiPrefix('baton', 'acme', 'support');
    const pull = parseEdgeSubject('baton', `${api}.CONSUMER.MSG.NEXT.${INBOX}.${durable}`, INBOX) as EdgeRoute;
    const info = parseEdgeSubject('baton', `${api}.CONSUMER.INFO.${INBOX}.${durable}`, INBOX) as EdgeRoute;
    const ack = parseEdgeSubject('baton', edgeAckSubject('baton', 'acme', 'support', `$JS.ACK.${INBOX}.${durable}.1.1.1.1.0`), INBOX) as EdgeRoute;
    const input = parseEdgeSubject('baton', 'baton.edge.acme.result.support', INBOX) as EdgeRoute;
    const body = (value: unknown) => new TextEncoder().encode(typeof value === 'string' ? value : JSON.stringify(value));
    // What the SDK sends.
    expect(edgeBodyRefusal(pull, body({ batch: 100, max_bytes: 2_097_152, expires: 1e9 }))).toBeNull();
    expect(edgeBodyRefusal(pull, body({ batch: 1, expires: 30e9, idle_heartbeat: 5e9, no_wait: false }))).toBeNull();
    for (const bad of [
      { batch: 1, expires: 1e9, idle_heartbeat: 1 },
      { batch: 0 },
      { batch: 5000 },
      { expires: 1e12 },
      { batch: 1.5 },
      { group: 'x' },
      [1],
      'nope',
    ]) {
      expect({ bad, refused: edgeBodyRefusal(pull, body(bad)) }).toEqual({ bad, refused: expect.any(String) });
    }
    expect(edgeBodyRefusal(info, body(''))).toBeNull();
    expect(edgeBodyRefusal(info, body('{}'))).toEqual(expect.any(String));
    for (const ok of ['', '+ACK', '+WPI', '-NAK', '-NAK {"delay":1000000000}', '+TERM', '+TERM gave up'])
      expect({ ok, refused: edgeBodyRefusal(ack, body(ok)) }).toEqual({ ok, refused: null });
    for (const bad of ['+NXT', '+NXT {"batch":1,"idle_heartbeat":1}', '-NAK {"delay":-1}', '-NAK {"delay":1,"x":2}', 'garbage', `+TERM ${'x'.repeat(2000)}`]) {
      expect({ bad: bad.slice(0, 30), refused: edgeBodyRefusal(ack, body(bad)) }).toEqual({ bad: bad.slice(0, 30), refused: expect.any(String) });
    }
    // Inputs are their consumers' to judge.
    expect(edgeBodyRefusal(input, body('anything'))).toBeNull();
  });
});
