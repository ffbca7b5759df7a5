import { isAgentNoticeSubject } from './claim-withdrawn';
import { mayRelayReply } from './edge';
import { describePrincipal, inboxParts, mayReplyTo, replyInboxOf, type Principal } from './principal';
import { isPlainSubject } from './subject-tokens';

/*
 * Where Baton answers a request: the one decision for the ledger's command answers and for the
 * agent edge (a message it relays — JetStream then answers on its reply subject — and its answer to
 * what it refuses). A request's reply subject is the requester's to choose, and the answer is
 * published there with the answering service's rights (or the server's, for JetStream).
 */

/**
 * Who sent a request, as far as its reply subject goes: the principal a ledger command subject
 * names (`ledger`), or the agent an agent edge subject names (`edge`; `agent` null on a project's
 * shared subject, which any agent of the project may publish: NATS does not say which).
 */
export type ReplySender = { via: 'ledger'; principal: Principal } | { via: 'edge'; project: string; agent: string | null };

/**
 * Why Baton must not answer on `reply` — a phrase that completes "reply subject <reply> …" — or
 * null when it may. `sender` is null when the subject names no one (a ledger command subject of
 * another shape, answered `unknown_command`). `authenticated`: the service connects to NATS with
 * credentials or a user and password (`natsAuthenticated` in @baton/platform).
 *
 * - With authentication on, only under the sender's own inbox (the ledger's {@link mayReplyTo},
 *   the edge's {@link mayRelayReply}): the subject names the sender and the server's permissions
 *   pin each principal to its own subjects, so the answer reaches no one else.
 * - Without authentication clients keep NATS's default inbox (`_INBOX.`), so any other plain
 *   subject is answered — but for what follows.
 * - In either mode, never a subject that is not plain (a wildcard or an empty token: nats-server
 *   2.9.10 crashed answering a JetStream API call whose reply held a wildcard); never under
 *   Baton's own subject space, `<prefix>.…` (inbox, events, commands, edge, dead letters, notices:
 *   the answer would be published onto it — stored as an input in the inbox stream, say); never
 *   JetStream's or the server's (`$…`: the answer would be an API call); never an agent's notice
 *   subject (`…withdrawn`, `…refused`: the answer would be read as a notice).
 */
export function replyRefusal(prefix: string, sender: ReplySender | null, reply: string, authenticated: boolean): string | null {
  if (authenticated && sender !== null) {
    const foreign = foreignInbox(prefix, sender, reply);
    if (foreign !== null) return foreign;
  }
  if (!isPlainSubject(reply)) return 'is not a plain subject (a wildcard or an empty token)';
  if (reply.startsWith(`${prefix}.`)) return `is under Baton's own subjects (${prefix}.…): the answer would be published onto them`;
  if (reply.startsWith('$')) return "is JetStream's or the server's ($…): the answer would be an API call";
  if (isNoticeSubject(prefix, reply)) return "is an agent's notice subject: the answer would be read as a notice";
  return null;
}

/** Null when `reply` is under the sender's own inbox; else why not. */
function foreignInbox(prefix: string, sender: ReplySender, reply: string): string | null {
  if (sender.via === 'ledger') {
    if (mayReplyTo(prefix, sender.principal, reply)) return null;
    return `is not under ${describePrincipal(sender.principal)}'s inbox ${replyInboxOf(prefix, sender.principal) ?? ''}`;
  }
  if (mayRelayReply(prefix, sender, reply)) return null;
  return `is not under the inbox of ${sender.agent !== null ? `agent ${sender.project}/${sender.agent}` : `an agent of project ${sender.project}`}`;
}

/** Is `reply` a notice subject of any agent of this deployment (`isAgentNoticeSubject` of the project its inbox names)? */
function isNoticeSubject(prefix: string, reply: string): boolean {
  const parts = inboxParts(reply);
  if (parts === null || parts.prefix !== prefix) return false;
  const [kind, project] = parts.principal.split('.');
  return kind === 'agent' && project !== undefined && isAgentNoticeSubject(prefix, project, reply);
}
