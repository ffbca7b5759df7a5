import { inboxPrefixOf, principalTokens, type Principal } from '@baton/contracts';
import { streamStem, tokenRevocationStream, watchdogSnapshotStream } from '../topology';
import type { UserPermissions } from './jwt';

/*
 * What each principal may publish and subscribe, enforced by nats-server. This is the tenant wall
 * of a Baton deployment: one NATS account, and inside it every principal is pinned to the subjects
 * that name it (the soft wall: a project prefix inside one account, made hard by permissions that
 * name the project and the agent). Nobody but the admin subscribes `_INBOX.>`; replies, publish
 * acknowledgements and pulled messages reach each principal on its own inbox prefix.
 *
 * Subjects (see libs/contracts/src/subjects.ts and principal.ts), for prefix P:
 *   P.ev.<project>.<kind>.<id>                  events: only the aggregate's writer service
 *   P.in.<project>.result.<agent>               agent results: only that agent
 *   P.in.<project>.{start,message,mesh_start}   an agent of that project (the shared client subjects)
 *   P.in.<project>.{start,message,mesh_start}.<agent>   naming their publisher: only that agent
 *   P.in.<project>.mesh_result.<agent>          mesh turns: only that agent
 *   P.in.<project>.{answer,mesh_answer}         operator answers: the notifier and the admin
 *   P.in.<project>.stop                         stop requests: the watchdog
 *   P.in.<project>.offer.<agent>                offers: the ledger
 *   P.cmd.ledger.<project>.<kind>.<name>.<cmd>  ledger commands: the principal the subject names
 *   P.cmd.router.<project>.publish_definition   the admin
 *   P.notice.<project>                          human action notices: the notifier
 *   P.dlq.<source>                              dead letters: the services; P.dlq._redriven (markers): the admin
 *   P.wd.>                                      the watchdog's snapshots (stream <PREFIX>_WATCHDOG): only the watchdog
 *   P.auth.revoked.<token_id>                   operator API token revocations (stream <PREFIX>_TOKEN_REVOCATIONS): only the admin;
 *                                               the notifier makes the stream and reads it (libs/platform/src/auth/token-revocations.ts)
 */

/** Stream names the permissions refer to. */
function streams(prefix: string) {
  const stem = streamStem(prefix);
  return {
    events: `${stem}_EVENTS`,
    inbox: `${stem}_INBOX`,
    dlq: `${stem}_DLQ`,
    claimRatesKv: `KV_${stem}_CLAIM_RATES`,
    claimRatesBucket: `${stem}_CLAIM_RATES`,
  };
}

/** The subject redrive markers are written on (only the admin may publish it). */
export function redriveMarkerSubjects(prefix: string): string[] {
  return [`${prefix}.dlq._redriven`, `${prefix}.dlq._redriven.>`];
}

/** JetStream API a service needs on Baton's streams: provision them, read, own durables, ack. */
function serviceJetStream(prefix: string, opts: { claimRates?: boolean } = {}): string[] {
  const s = streams(prefix);
  const names = [s.events, s.inbox, s.dlq, ...(opts.claimRates ? [s.claimRatesKv] : [])];
  const api: string[] = ['$JS.API.INFO', '$JS.API.STREAM.NAMES', '$JS.API.STREAM.LIST', '$JS.API.CONSUMER.NAMES.*', '$JS.API.CONSUMER.LIST.*'];
  for (const name of names) {
    api.push(
      `$JS.API.STREAM.INFO.${name}`,
      `$JS.API.STREAM.CREATE.${name}`,
      `$JS.API.STREAM.UPDATE.${name}`,
      `$JS.API.STREAM.MSG.GET.${name}`,
      `$JS.API.DIRECT.GET.${name}`,
      `$JS.API.DIRECT.GET.${name}.>`,
      `$JS.API.CONSUMER.*.${name}`,
      `$JS.API.CONSUMER.*.${name}.>`,
      `$JS.API.CONSUMER.*.*.${name}`,
      `$JS.API.CONSUMER.*.*.${name}.>`,
      `$JS.ACK.${name}.>`,
    );
  }
  // Flow control replies of the ordered (push) consumers used for reads.
  api.push('$JS.FC.>');
  if (opts.claimRates) api.push(`$KV.${s.claimRatesBucket}.>`);
  return api;
}

/**
 * The token revocation log (`<PREFIX>_TOKEN_REVOCATIONS`, {@link tokenRevocationStream}): the notifier makes it when missing, reads it by subject
 * and follows it (a consumer of its own: create, pull, info, delete); it may not publish on its subjects, nor delete or purge it (only the admin
 * appends revocations).
 */
function tokenRevocationApi(prefix: string): string[] {
  const { name } = tokenRevocationStream(prefix);
  return [
    `$JS.API.STREAM.INFO.${name}`,
    `$JS.API.STREAM.CREATE.${name}`,
    `$JS.API.STREAM.UPDATE.${name}`,
    `$JS.API.STREAM.MSG.GET.${name}`,
    `$JS.API.CONSUMER.*.${name}`,
    `$JS.API.CONSUMER.*.${name}.>`,
    `$JS.API.CONSUMER.*.*.${name}.>`,
  ];
}

/** The watchdog's own snapshot stream: publish its subjects, make and read the stream, purge its old chunks. */
function watchdogSnapshotApi(prefix: string): string[] {
  const { name, subjects } = watchdogSnapshotStream(prefix);
  return [
    ...subjects,
    `$JS.API.STREAM.INFO.${name}`,
    `$JS.API.STREAM.CREATE.${name}`,
    `$JS.API.STREAM.UPDATE.${name}`,
    `$JS.API.STREAM.MSG.GET.${name}`,
    `$JS.API.STREAM.PURGE.${name}`,
  ];
}

/**
 * The permissions of one principal for a deployment prefix. Pure: the same principal and prefix
 * always give the same lists, so `baton nats-config` output can be checked by tests and reviews.
 */
export function permissionsFor(prefix: string, principal: Principal): UserPermissions {
  const inbox = `${inboxPrefixOf(prefix, principal)}.>`;
  const markers = redriveMarkerSubjects(prefix);
  switch (principal.kind) {
    case 'agent': {
      const { project, agent } = principal;
      const [kind, name] = principalTokens(principal);
      // Nothing JetStream reads: JetStream answers on the reply subject a client sets, with the
      // server's rights (a publish ack, a pulled message, an ack's confirmation), so an agent that
      // may publish into a stream, call the API or acknowledge could aim that answer at an event
      // subject or `$JS.API.STREAM.DELETE.<stream>`. It publishes on its edge subjects instead
      // (`libs/contracts/src/edge.ts`); the ledger relays them once the reply is the agent's own
      // inbox. Its offers durable likewise: pull, read its info and acknowledge through
      // `…edge.<project>.offers.<agent>.>` (it cannot create, delete or list consumers).
      return {
        pub: {
          allow: [
            `${prefix}.edge.${project}.result.${agent}`,
            `${prefix}.edge.${project}.mesh_result.${agent}`,
            `${prefix}.edge.${project}.start`,
            `${prefix}.edge.${project}.start.${agent}`,
            `${prefix}.edge.${project}.message`,
            `${prefix}.edge.${project}.message.${agent}`,
            `${prefix}.edge.${project}.mesh_start`,
            `${prefix}.edge.${project}.mesh_start.${agent}`,
            `${prefix}.edge.${project}.offers.${agent}.>`,
            `${prefix}.cmd.ledger.${project}.${kind}.${name}.*`,
          ],
        },
        sub: { allow: [inbox] },
      };
    }
    case 'svc': {
      const common = { sub: { allow: [inbox] }, deny: markers };
      // The services that answer requests (router, ledger) may publish replies only under the
      // principals' inbox prefixes, never wherever a requester's reply subject points:
      // `allow_responses` would let an agent name any subject (an event, another project's answer,
      // `$JS.API.STREAM.PURGE.…`) and have the service publish there with the service's rights.
      const replies = `_INBOX_${prefix}.>`;
      switch (principal.service) {
        case 'router':
          return {
            pub: {
              allow: [
                `${prefix}.ev.*.run.*`,
                `${prefix}.ev.*.definition.*`,
                `${prefix}.ev.*.mesh.*`,
                `${prefix}.cmd.ledger.*.svc.router.*`,
                `${prefix}.dlq.>`,
                replies,
                ...serviceJetStream(prefix),
              ],
              deny: common.deny,
            },
            // It serves router commands and watches definition events as they are stored.
            sub: { allow: [inbox, `${prefix}.cmd.router.>`, `${prefix}.ev.*.definition.*`] },
          };
        case 'ledger':
          return {
            pub: {
              allow: [
                `${prefix}.ev.*.handoff.*`,
                `${prefix}.ev.*.project.*`,
                `${prefix}.in.*.offer.*`,
                `${prefix}.dlq.>`,
                replies,
                // The agent edge it relays (edge.ts): what agents publish, and their offers durables' pulls and acks.
                ...['result.*', 'mesh_result.*', 'start', 'start.*', 'message', 'message.*', 'mesh_start', 'mesh_start.*'].map(
                  (kind) => `${prefix}.in.*.${kind}`,
                ),
                ...serviceJetStream(prefix, { claimRates: true }),
              ],
              deny: common.deny,
            },
            sub: { allow: [inbox, `${prefix}.cmd.ledger.>`, `${prefix}.edge.>`] },
          };
        case 'watchdog':
          return {
            pub: {
              allow: [
                `${prefix}.in.*.stop`,
                `${prefix}.cmd.ledger.*.svc.watchdog.*`,
                `${prefix}.dlq.>`,
                ...serviceJetStream(prefix),
                // Its snapshots (apps/watchdog/src/snapshot): chunks and head written, read back, old chunks purged.
                ...watchdogSnapshotApi(prefix),
              ],
              deny: common.deny,
            },
            sub: common.sub,
          };
        case 'notifier':
          return {
            pub: {
              allow: [
                `${prefix}.in.*.answer`,
                `${prefix}.in.*.mesh_answer`,
                `${prefix}.notice.>`,
                `${prefix}.cmd.ledger.*.op.notifier.*`,
                `${prefix}.dlq.>`,
                ...serviceJetStream(prefix),
                ...tokenRevocationApi(prefix),
              ],
              deny: common.deny,
            },
            sub: common.sub,
          };
        default: {
          const never: never = principal.service;
          throw new Error(`unknown service ${String(never)}`);
        }
      }
    }
    case 'op':
      if (principal.relay === 'admin') {
        // The baton CLI and SREs: everything in the account (replay, verify, streams, redrive, pause).
        // No allow_responses: publishing to `>` already covers every reply subject, and on
        // nats-server 2.9 a connection holding it has the server remember the reply subject of every
        // message delivered to it for the permission's lifetime (2 minutes) and, past 4 096 of them,
        // walk them all on each delivery — on the stream's own goroutine, so a replay's un-acked read
        // slowed to ~150 events/s and stalled every append to the events stream.
        return { pub: { allow: ['>'] }, sub: { allow: ['>'] } };
      }
      // op.notifier is the notifier service's own principal for ledger commands; it has no separate connection.
      return permissionsFor(prefix, { kind: 'svc', service: 'notifier' });
    default: {
      const never: never = principal;
      throw new Error(`unknown principal ${JSON.stringify(never)}`);
    }
  }
}
