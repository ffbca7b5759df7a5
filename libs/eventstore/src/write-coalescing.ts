import type { NatsConnection } from 'nats';

/**
 * The parts of the client's private protocol handler this module touches (nats 2.29): the
 * transport it writes through (replaced on every reconnect, so read it at each call), and the two
 * methods that hand bytes to it. Checked at run time; a client of another shape is left alone.
 */
interface ProtocolInternals {
  transport?: { socket?: CorkableSocket };
  flushPending: () => void;
  _close: (err?: Error) => Promise<void>;
}

interface CorkableSocket {
  cork(): void;
  uncork(): void;
  readonly writableCorked: number;
  readonly destroyed: boolean;
}

/** What {@link coalesceWrites} did to a connection. */
export type WriteCoalescing = { on: true } | { on: false; reason: string };

const COALESCED = Symbol('baton.coalescedWrites');

/**
 * Send everything a connection writes during one turn of the event loop in one socket write.
 *
 * The client flushes its outgoing buffer in a microtask after the first command it buffers. A
 * service that handles a pulled batch does so in many microtasks (one message's handler awaits,
 * the next one runs), so every ack, publish and pull request tended to reach the socket on its
 * own: one `write` system call each, about a fifth of each service's CPU under the bench's load
 * (`writeBuffer` in the profiles, docs/performance.md). Here the first flush of a turn corks the
 * socket and a `setImmediate` uncorks it after the turn's I/O callbacks have run: the turn's
 * frames leave together in one `writev`. Nothing is reordered or held longer than the rest of the
 * current turn; the client's own rules are unchanged (it still flushes at once past 32 KiB,
 * PINGs still flush), and a close uncorks first so nothing written before it is lost.
 *
 * Touches the client's private protocol handler, so it checks the shape it relies on and does
 * nothing (saying why) when the client is not what it expects. Idempotent.
 */
export function coalesceWrites(connection: NatsConnection): WriteCoalescing {
  const protocol = (connection as unknown as { protocol?: ProtocolInternals & { [COALESCED]?: true } }).protocol;
  if (!protocol || typeof protocol.flushPending !== 'function' || typeof protocol._close !== 'function') {
    return { on: false, reason: 'the NATS client has no protocol handler of the expected shape' };
  }
  if (protocol[COALESCED]) return { on: true };
  const flushPending = protocol.flushPending.bind(protocol);
  const close = protocol._close.bind(protocol);
  let corked: CorkableSocket | undefined;
  const uncork = () => {
    const socket = corked;
    corked = undefined;
    if (socket && !socket.destroyed) while (socket.writableCorked > 0) socket.uncork();
  };
  protocol.flushPending = () => {
    const socket = protocol.transport?.socket;
    if (socket && corked !== socket && typeof socket.cork === 'function' && !socket.destroyed) {
      uncork();
      socket.cork();
      corked = socket;
      setImmediate(uncork);
    }
    flushPending();
  };
  protocol._close = (err?: Error) => {
    uncork();
    return close(err);
  };
  protocol[COALESCED] = true;
  return { on: true };
}
