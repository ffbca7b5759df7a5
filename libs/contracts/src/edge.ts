import { inboxPrefixOf, isPlainSubject, offerDurableName, Principals, projectAgentsInboxPrefix, type Principal } from './principal';
import { isSubjectToken, parseSubject, SubjectTable } from './subjects';

/*
 * The agent edge: the subjects through which an agent reaches JetStream.
 *
 * JetStream answers a publish (its ack), a pull (the messages), an acknowledgement (its
 * confirmation) and every API call on the reply subject the client set — whatever that subject
 * is, with the server's rights. A client that may publish anything JetStream answers could aim
 * that answer at an event subject, another project's inbox, or `$JS.API.STREAM.DELETE.<stream>`.
 * So agents may publish nothing JetStream reads. They publish on `<prefix>.edge.…` instead, and
 * the ledger relays each message to what it stands for, with its headers and bytes, once its reply
 * subject is the agent's own inbox (`mayRelayReply`): JetStream's answer then goes straight to the
 * agent. The shapes:
 *
 *   <prefix>.edge.<project>.<kind>[.<agent>]            → <prefix>.in.<project>.<kind>[.<agent>]
 *     (the inbox kinds an agent publishes: result, mesh_result, start, message, mesh_start)
 *   <prefix>.edge.<project>.offers.<agent>.api.<call>   → $JS.API.<call>
 *     (only CONSUMER.MSG.NEXT and CONSUMER.INFO of the agent's own offers durable)
 *   <prefix>.edge.<project>.offers.<agent>.ack.<tokens> → $JS.ACK.<tokens>
 *     (only acknowledgements of the agent's own offers durable)
 */

/** The inbox kinds an agent publishes (through the edge). */
export const EdgeInputKinds = ['result', 'mesh_result', 'start', 'message', 'mesh_start'] as const;

/** Where an edge message goes, and who may have sent it. */
export type EdgeRoute =
  | { kind: 'input'; project: string; agent: string | null; target: string }
  | { kind: 'api' | 'ack'; project: string; agent: string; target: string };

/** The edge subject an agent publishes for an inbox subject (`<prefix>.in.…` → `<prefix>.edge.…`). */
export function edgeSubjectOf(prefix: string, inboxSubject: string): string {
  const head = `${prefix}.in.`;
  if (!inboxSubject.startsWith(head)) throw new Error(`${inboxSubject} is not an inbox subject of prefix ${prefix}`);
  return `${prefix}.edge.${inboxSubject.slice(head.length)}`;
}

/** The JetStream API prefix an agent's client uses for its offers durable: its calls go through the edge. */
export function edgeApiPrefix(prefix: string, project: string, agent: string): string {
  return `${prefix}.edge.${project}.offers.${agent}.api`;
}

/** The edge subject of an acknowledgement (`$JS.ACK.<tokens>` → `<prefix>.edge.<project>.offers.<agent>.ack.<tokens>`). */
export function edgeAckSubject(prefix: string, project: string, agent: string, ackSubject: string): string {
  if (!ackSubject.startsWith('$JS.ACK.')) throw new Error(`${ackSubject} is not an acknowledgement subject`);
  return `${prefix}.edge.${project}.offers.${agent}.ack.${ackSubject.slice('$JS.ACK.'.length)}`;
}

/**
 * Read an edge subject: where it goes and who sent it, or why it goes nowhere. `inboxStream` is
 * the deployment's inbox stream (the offers durables' stream).
 */
export function parseEdgeSubject(prefix: string, subject: string, inboxStream: string): EdgeRoute | { refused: string } {
  const tokens = subject.split('.');
  if (tokens[0] !== prefix || tokens[1] !== 'edge' || tokens.length < 4 || !tokens.every(isSubjectToken)) {
    return { refused: `${subject} is not <prefix>.edge.<project>.…` };
  }
  const project = tokens[2]!;
  if (tokens[3] === 'offers') return offersRoute(tokens, project, inboxStream, subject);
  const target = [prefix, 'in', ...tokens.slice(2)].join('.');
  const parsed = parseSubject(prefix, target);
  if (parsed === null || parsed.name === 'unknown' || SubjectTable[parsed.name].area !== 'in' || !(EdgeInputKinds as readonly string[]).includes(tokens[3]!)) {
    return { refused: `${subject} names no inbox subject an agent publishes (${EdgeInputKinds.join(', ')})` };
  }
  return { kind: 'input', project, agent: tokens[4] ?? null, target };
}

function offersRoute(tokens: string[], project: string, inboxStream: string, subject: string): EdgeRoute | { refused: string } {
  const agent = tokens[4];
  if (agent === undefined || tokens.length < 7) return { refused: `${subject} is not <prefix>.edge.<project>.offers.<agent>.(api|ack).…` };
  const durable = offerDurableName(project, agent);
  const rest = tokens.slice(6);
  if (tokens[5] === 'api') {
    // CONSUMER.MSG.NEXT.<stream>.<durable> or CONSUMER.INFO.<stream>.<durable>, of its own durable only.
    const call = rest.join('.');
    if (call === `CONSUMER.MSG.NEXT.${inboxStream}.${durable}` || call === `CONSUMER.INFO.${inboxStream}.${durable}`) {
      return { kind: 'api', project, agent, target: `$JS.API.${call}` };
    }
    return { refused: `${subject}: an agent's edge carries only CONSUMER.MSG.NEXT and CONSUMER.INFO of its own offers durable ${durable}` };
  }
  if (tokens[5] === 'ack') {
    // $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending> (7 tokens), or the form
    // with a domain and an account hash first (9 or more).
    const [stream, consumer] = rest.length === 7 ? [rest[0], rest[1]] : rest.length >= 9 ? [rest[2], rest[3]] : [undefined, undefined];
    if (stream === inboxStream && consumer === durable) return { kind: 'ack', project, agent, target: `$JS.ACK.${rest.join('.')}` };
    return { refused: `${subject}: an agent acknowledges only messages of its own offers durable ${durable}` };
  }
  return { refused: `${subject} is not <prefix>.edge.<project>.offers.<agent>.(api|ack).…` };
}

/**
 * May an edge message with this route have `reply` as its reply subject? Only the sender's own
 * inbox: the agent's for a subject that names it; for a project's shared subject (a start or a
 * message any of its agents may publish), the inbox of an agent of that project.
 */
export function mayRelayReply(prefix: string, route: EdgeRoute, reply: string): boolean {
  if (!isPlainSubject(reply)) return false;
  if (route.agent !== null) {
    const inbox = inboxPrefixOf(prefix, Principals.agent(route.project, route.agent));
    return reply.length > inbox.length + 1 && reply.startsWith(`${inbox}.`);
  }
  // A shared subject: under some agent's inbox of the project (an agent token, then the rest).
  const project = projectAgentsInboxPrefix(prefix, route.project);
  return reply.startsWith(`${project}.`) && reply.slice(project.length + 1).split('.').length >= 2;
}

/** The principal an edge route speaks for (an agent; null for a project's shared subject). */
export function edgePrincipal(route: EdgeRoute): Principal | null {
  return route.agent !== null ? Principals.agent(route.project, route.agent) : null;
}
