import { claimWithdrawnSubject } from './claim-withdrawn';
import { Principals } from './principal';
import { replyRefusal, type ReplySender } from './reply-subject';
import { resultRefusedSubject } from './result-refused';

const agent: ReplySender = { via: 'ledger', principal: Principals.agent('acme', 'support') };
const admin: ReplySender = { via: 'ledger', principal: Principals.operator('admin') };
const edgeAgent: ReplySender = { via: 'edge', project: 'acme', agent: 'support' };
const edgeShared: ReplySender = { via: 'edge', project: 'acme', agent: null };

/** Subjects Baton never answers on, whoever asks and whether or not NATS authenticates. */
const NEVER = [
  'baton.zz.reply',
  'baton.in.acme.result.x',
  'baton.ev.acme.run.wr-1',
  'baton.cmd.ledger.acme.agent.support.claim',
  'baton.notice.acme',
  '$JS.API.STREAM.DELETE.BATON_EVENTS',
  '$SYS.REQ.SERVER.PING',
  claimWithdrawnSubject('baton', 'acme', 'support'),
  `${resultRefusedSubject('baton', 'globex', 'billing')}.x`,
  '_INBOX.*',
  '_INBOX.>',
  '_INBOX..x',
];

describe('replyRefusal: where the ledger and the agent edge answer a request', () => {
  it('without authentication: any plain subject (NATS`s default inbox, another agent`s inbox) but Baton`s own, JetStream`s and the notice subjects', () => {
    for (const sender of [agent, admin, edgeAgent, edgeShared, null]) {
      for (const reply of ['_INBOX.abc.1', 'replies.x', '_INBOX_baton.agent.globex.billing.x', '_INBOX_baton.agent.acme.billing.withdrawnish.1']) {
        expect({ sender, reply, why: replyRefusal('baton', sender, reply, false) }).toEqual({ sender, reply, why: null });
      }
      for (const reply of NEVER) {
        expect({ sender, reply, refused: replyRefusal('baton', sender, reply, false) !== null }).toEqual({ sender, reply, refused: true });
      }
    }
    expect(replyRefusal('baton', agent, 'baton.in.acme.result.x', false)).toBe(
      "is under Baton's own subjects (baton.…): the answer would be published onto them",
    );
    // Another deployment's subjects are not this one's.
    expect(replyRefusal('baton', agent, 'batonx.in.acme.result.x', false)).toBeNull();
  });

  it('with authentication: only the sender`s own inbox (the ledger`s mayReplyTo, the edge`s mayRelayReply), and never Baton`s own subjects even for the admin', () => {
    expect(replyRefusal('baton', agent, '_INBOX_baton.agent.acme.support.abc.1', true)).toBeNull();
    expect(replyRefusal('baton', edgeAgent, '_INBOX_baton.agent.acme.support.abc.1', true)).toBeNull();
    expect(replyRefusal('baton', edgeShared, '_INBOX_baton.agent.acme.billing.abc.1', true)).toBeNull();
    for (const reply of ['_INBOX.abc', '_INBOX_baton.agent.acme.billing.x', '_INBOX_baton.svc.ledger.x', 'replies.x', ...NEVER]) {
      expect({ reply, refused: replyRefusal('baton', agent, reply, true) !== null }).toEqual({ reply, refused: true });
      expect({ reply, refused: replyRefusal('baton', edgeAgent, reply, true) !== null }).toEqual({ reply, refused: true });
    }
    expect(replyRefusal('baton', agent, '_INBOX_baton.agent.globex.support.x', true)).toBe(
      "is not under agent acme/support's inbox _INBOX_baton.agent.acme.support",
    );
    expect(replyRefusal('baton', edgeShared, '_INBOX.x', true)).toBe('is not under the inbox of an agent of project acme');
    // The admin may be answered anywhere it could publish itself — but not onto Baton's subjects.
    expect(replyRefusal('baton', admin, '_INBOX.abc', true)).toBeNull();
    for (const reply of NEVER) expect({ reply, refused: replyRefusal('baton', admin, reply, true) !== null }).toEqual({ reply, refused: true });
    // A subject that names no one: the server's permissions pin whoever sent it; Baton's own subjects stay refused.
    expect(replyRefusal('baton', null, '_INBOX_baton.svc.router.x', true)).toBeNull();
    expect(replyRefusal('baton', null, 'baton.zz.reply', true)).not.toBeNull();
  });
});
