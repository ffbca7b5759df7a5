import {
  EDGE_REFUSAL_DETAIL_CHARS,
  EDGE_REFUSAL_DETAIL_HEADER,
  EDGE_REFUSAL_HEADER,
  edgeAckSubject,
  edgeAnswerForm,
  edgeApiPrefix,
  edgeBodyRefusal,
  readEdgeInput,
  edgeRefusalAnswer,
  edgeRefusalOf,
  EdgeRefusalReplySchema,
  edgeSubjectOf,
  mayRelayReply,
  parseEdgeSubject,
  type EdgeRoute,
} from './edge';
import { claimWithdrawnSubject } from './claim-withdrawn';
import { resultRefusedSubject } from './result-refused';
import { MsgIds } from './msg-ids';
import { offerDurableName } from './principal';
import { replyRefusal } from './reply-subject';

/** May the edge answer (or relay) a message of `sender` on `reply` (`replyRefusal`, the decision it shares with the ledger)? */
const edgeAnswersOn = (prefix: string, sender: { project: string; agent: string | null }, reply: string, authenticated: boolean) =>
  replyRefusal(prefix, { via: 'edge', ...sender }, reply, authenticated) === null;

/** Why the edge refuses an inbox message's body (what `readEdgeInput` says), or null when its consumer would take it. */
const refusalOf = (...args: Parameters<typeof readEdgeInput>) => {
  const read = readEdgeInput(...args);
  return 'refused' in read ? read.refused : null;
};

const INBOX = 'BATON_INBOX';
const durable = offerDurableName('acme', 'support');

describe('the agent edge: what each edge subject stands for', () => {
  it('relays an agent`s inbox kinds to the in subject they stand for, and nothing else of the inbox', () => {
    for (const rest of ['result.support', 'mesh_result.support', 'start', 'start.support', 'message', 'message.support', 'mesh_start', 'mesh_start.support']) {
      const route = parseEdgeSubject('baton', `baton.edge.acme.${rest}`, INBOX);
      const agent = rest.includes('.') ? 'support' : null;
      expect(route).toEqual({
        kind: 'input',
        inbox: rest.split('.')[0],
        project: 'acme',
        agent,
        target: `baton.in.acme.${rest}`,
        sender: agent === null ? 'acme' : 'acme/support',
      });
    }
    for (const rest of ['answer', 'mesh_answer', 'stop', 'offer.support', 'result', 'nonsense', 'result.support.extra']) {
      expect({ rest, route: parseEdgeSubject('baton', `baton.edge.acme.${rest}`, INBOX) }).toEqual({
        rest,
        route: { refused: expect.any(String), sender: expect.any(String), answer: 'json', project: 'acme', agent: rest.includes('.') ? 'support' : null },
      });
    }
    expect(parseEdgeSubject('baton', 'other.edge.acme.result.support', INBOX)).toEqual({
      refused: expect.any(String),
      sender: expect.any(String),
      answer: 'json',
      project: 'acme',
      agent: 'support',
    });
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
      sender: 'acme/support',
      answer: 'status',
      project: 'acme',
      agent: 'support',
    });
    const smuggled = `$JS.ACK.${INBOX}.${offerDurableName('globex', 'support')}.${INBOX}.${durable}.1.1.1.1.1`;
    expect(parseEdgeSubject('baton', edgeAckSubject('baton', 'acme', 'support', smuggled), INBOX)).toEqual({
      refused: expect.any(String),
      sender: 'acme/support',
      answer: 'status',
      project: 'acme',
      agent: 'support',
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
        // What reads as a pull or an acknowledgement is answered with a status message; the rest as JetStream's API errors.
        route: {
          refused: expect.any(String),
          sender: 'acme/support',
          answer: /\.(CONSUMER\.MSG\.NEXT|ack)\./.test(subject) ? 'status' : 'json',
          project: 'acme',
          agent: 'support',
        },
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
    // Project and agent as the answer's check reads them: no agent on a shared subject.
    expect(parseEdgeSubject('p', 'p.edge.acme.result.bob.extra', INBOX)).toMatchObject({ project: 'acme', agent: 'bob' });
    expect(parseEdgeSubject('p', 'p.edge.acme.nonsense', INBOX)).toMatchObject({ project: 'acme', agent: null });
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

describe('the agent edge: what it answers when it refuses', () => {
  const api = edgeApiPrefix('baton', 'acme', 'support');
  /** How a refusal of what was published on `subject` is answered, as the relay reads it. */
  const formOf = (subject: string) => edgeAnswerForm(parseEdgeSubject('baton', subject, INBOX));

  it('answers a publish, a CONSUMER.INFO call and a subject of another shape with a JetStream API error carrying the reason; a pull and an acknowledgement with an empty 400 status message and the reason in a header', () => {
    for (const subject of [
      'baton.edge.acme.result.support',
      'baton.edge.acme.start',
      `${api}.CONSUMER.INFO.${INBOX}.${durable}`,
      `${api}.STREAM.DELETE.${INBOX}`,
      'baton.edge.acme.nonsense',
    ]) {
      const answer = edgeRefusalAnswer(formOf(subject), 'msg_id_mismatch', 'the id names project globex');
      expect({ subject, answer }).toEqual({
        subject,
        answer: {
          form: 'json',
          body: {
            error: { code: 400, description: 'msg_id_mismatch: the id names project globex', reason: 'msg_id_mismatch', detail: 'the id names project globex' },
          },
        },
      });
      // What docs/schemas/edge-refusal-reply.json publishes.
      expect(EdgeRefusalReplySchema.safeParse(answer.form === 'json' ? answer.body : null).success).toBe(true);
    }
    for (const subject of [`${api}.CONSUMER.MSG.NEXT.${INBOX}.${durable}`, `baton.edge.acme.offers.support.ack.${INBOX}.${durable}.1.2.3.4.0`]) {
      expect({ subject, answer: edgeRefusalAnswer(formOf(subject), 'schema_violation', 'a pull is a JSON object') }).toEqual({
        subject,
        answer: {
          form: 'status',
          code: 400,
          description: 'Baton Edge Refused schema_violation',
          headers: { [EDGE_REFUSAL_HEADER]: 'schema_violation', [EDGE_REFUSAL_DETAIL_HEADER]: 'a pull is a JSON object' },
        },
      });
    }
  });

  it('says why in one line a header can carry, cut to its bound', () => {
    const answer = edgeRefusalAnswer(
      formOf(`${api}.CONSUMER.MSG.NEXT.${INBOX}.${durable}`),
      'schema_violation',
      `two\r\nlines\twith a \u0000 nul ${'x'.repeat(2_000)}`,
    );
    const detail = answer.form === 'status' ? answer.headers[EDGE_REFUSAL_DETAIL_HEADER]! : '';
    expect(detail.startsWith('two lines with a ? nul x')).toBe(true);
    expect(detail).toHaveLength(EDGE_REFUSAL_DETAIL_CHARS);
    expect([...detail].filter((c) => c === '\r' || c === '\n' || c === '\u0000')).toEqual([]);
    const json = edgeRefusalAnswer(formOf('baton.edge.acme.result.support'), 'payload_too_large', 'y'.repeat(2_000));
    expect(json.form === 'json' && json.body.error.detail.length).toBe(EDGE_REFUSAL_DETAIL_CHARS);
  });

  it('answers only on the sender`s own inbox with authentication; without it, on any plain subject but JetStream`s, the server`s and Baton`s own', () => {
    const own = { project: 'acme', agent: 'support' };
    const shared = { project: 'acme', agent: null };
    expect(edgeAnswersOn('baton', own, '_INBOX_baton.agent.acme.support.abc', true)).toBe(true);
    expect(edgeAnswersOn('baton', shared, '_INBOX_baton.agent.acme.billing.abc', true)).toBe(true);
    for (const reply of ['_INBOX_baton.agent.acme.billing.abc', '_INBOX.abc', '_INBOX_baton.agent.acme.support.>', 'baton.ev.acme.run.x']) {
      expect({ reply, answered: edgeAnswersOn('baton', own, reply, true) }).toEqual({ reply, answered: false });
    }
    expect(edgeAnswersOn('baton', own, '_INBOX.abc.1', false)).toBe(true);
    for (const reply of [
      '$JS.API.STREAM.DELETE.BATON_EVENTS',
      '$SYS.REQ.SERVER.PING',
      'baton.ev.acme.run.x',
      'baton.in.acme.answer',
      '_INBOX.*',
      '_INBOX.>',
      '_INBOX..x',
    ]) {
      expect({ reply, answered: edgeAnswersOn('baton', own, reply, false) }).toEqual({ reply, answered: false });
    }
  });

  it('reads the refusal back from the error a JetStream client throws (its api_error), and nothing else as one', () => {
    const answer = edgeRefusalAnswer(formOf('baton.edge.acme.start'), 'no_handler', 'names no inbox subject');
    const body = answer.form === 'json' ? answer.body : null;
    expect(edgeRefusalOf({ api_error: body?.error })).toEqual(body?.error);
    expect(edgeRefusalOf({ api_error: { code: 400, description: 'bad request', err_code: 10_003 } })).toBeNull();
    expect(edgeRefusalOf({ api_error: { ...body?.error, reason: 'reply_not_allowed' } })).toBeNull();
    expect(edgeRefusalOf(new Error('timeout'))).toBeNull();
    expect(edgeRefusalOf(null)).toBeNull();
  });
});

describe('the agent edge: an inbox message its consumer would refuse is refused at the edge', () => {
  const encode = (value: unknown) => new TextEncoder().encode(typeof value === 'string' ? value : JSON.stringify(value));
  const route = (rest: string) => {
    const parsed = parseEdgeSubject('baton', `baton.edge.acme.${rest}`, INBOX);
    if (!('kind' in parsed) || parsed.kind !== 'input') throw new Error(`not an input: ${rest}`);
    return parsed;
  };
  const result = { result_id: 'r1', run_id: 'ar-1', project: 'acme', workflow_run_id: 'wr-1', agent: 'support', produced_at: '2026-12-01T10:00:00.000Z' };

  it('relays a body its consumer reads, under its own id, a client`s own id or none', () => {
    for (const msgId of [MsgIds.result('acme', 'wr-1', 'r1'), 'my-own-uuid-1', undefined]) {
      expect({ msgId, refused: refusalOf(route('result.support'), encode(result), msgId) }).toEqual({ msgId, refused: null });
    }
    // A typed decision that breaks the contract is no refusal for a run's result (the no-action default applies).
    expect(refusalOf(route('result.support'), encode({ ...result, decision: { nonsense: true } }), undefined)).toBeNull();
    const start = { workflow_run_id: 'wr-2', project: 'acme', workflow: 'support', started_by: 'dana' };
    expect(refusalOf(route('start'), encode(start), MsgIds.start('acme', 'wr-2'))).toBeNull();
    // A start names no agent: on the agent's own start subject too.
    expect(refusalOf(route('start.support'), encode(start), undefined)).toBeNull();
  });

  it('refuses what the consumer would, with its code and the fields: bytes, JSON, schema, another project or agent', () => {
    const cases: Array<[string, unknown, string]> = [
      ['result.support', { ...result, colour: 'blue' }, 'schema_violation'],
      ['result.support', '{"result_id": ', 'malformed_json'],
      ['result.support', { ...result, project: 'globex' }, 'project_mismatch'],
      ['result.support', { ...result, agent: 'billing' }, 'identity_mismatch'],
      ['mesh_result.support', { ...result, agent: 'billing' }, 'identity_mismatch'],
      ['start', { workflow_run_id: 'wr-2', project: 'acme', workflow: 'support' }, 'schema_violation'],
      ['message', { text: 'hi' }, 'schema_violation'],
    ];
    for (const [rest, body, reason] of cases) {
      expect({ rest, body, refused: refusalOf(route(rest), encode(body), undefined)?.reason }).toEqual({ rest, body, refused: reason });
    }
    expect(refusalOf(route('result.support'), new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]), undefined)?.reason).toBe('invalid_utf8');
    const extra = refusalOf(route('result.support'), encode({ ...result, colour: 'blue' }), undefined);
    expect(extra?.issues.length).toBeGreaterThan(0);
    expect(extra?.detail).toContain('colour');
  });

  it('refuses an id in Baton`s form for this project and kind that is not this message`s (another run`s, another result`s): it would take that message`s id first', () => {
    for (const msgId of [MsgIds.result('acme', 'wr-other', 'r1'), MsgIds.result('acme', 'wr-1', 'r2')]) {
      expect({ msgId, refused: refusalOf(route('result.support'), encode(result), msgId) }).toEqual({
        msgId,
        refused: { reason: 'msg_id_mismatch', detail: expect.stringContaining(MsgIds.result('acme', 'wr-1', 'r1')), issues: [] },
      });
    }
  });

  it('never takes an agent`s notice subject for a reply: not its own, nor, on a shared subject, a sibling`s', () => {
    const own = { project: 'acme', agent: 'support' };
    const shared = { project: 'acme', agent: null };
    expect(mayRelayReply('baton', own, claimWithdrawnSubject('baton', 'acme', 'support'))).toBe(false);
    expect(mayRelayReply('baton', shared, claimWithdrawnSubject('baton', 'acme', 'billing'))).toBe(false);
    expect(mayRelayReply('baton', shared, `${claimWithdrawnSubject('baton', 'acme', 'billing')}.x`)).toBe(false);
    // An inbox token that merely contains the word is a reply subject like any other.
    expect(mayRelayReply('baton', shared, '_INBOX_baton.agent.acme.billing.withdrawnish.1')).toBe(true);
    expect(edgeAnswersOn('baton', shared, claimWithdrawnSubject('baton', 'acme', 'billing'), true)).toBe(false);
    expect(edgeAnswersOn('baton', shared, claimWithdrawnSubject('baton', 'acme', 'billing'), false)).toBe(false);
    // Its refused-result notices (result-refused.ts) are notice subjects too: a reply aimed there would read as the router's.
    expect(mayRelayReply('baton', own, resultRefusedSubject('baton', 'acme', 'support'))).toBe(false);
    expect(mayRelayReply('baton', shared, `${resultRefusedSubject('baton', 'acme', 'billing')}.x`)).toBe(false);
    expect(mayRelayReply('baton', shared, '_INBOX_baton.agent.acme.billing.refusedish.1')).toBe(true);
    expect(edgeAnswersOn('baton', shared, resultRefusedSubject('baton', 'acme', 'billing'), true)).toBe(false);
  });
});
