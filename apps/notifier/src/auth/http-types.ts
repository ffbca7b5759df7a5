import type { IncomingHttpHeaders } from 'node:http';
import type { Principal } from './roles';
import type { Session } from './session-store';

/** The parts of an Express request the notifier reads (Express's own types are not installed). */
export interface HttpRequest {
  method: string;
  path: string;
  originalUrl: string;
  headers: IncomingHttpHeaders;
  body?: unknown;
  query?: unknown;
  /** Set by the auth guard. */
  principal?: Principal;
  /** Set when a browser session authenticated the request. */
  session?: Session;
  /** The client address (Express: the socket's peer unless `trust proxy` is set). */
  ip?: string;
  socket?: { remoteAddress?: string };
  /** The client hung up (or the request was destroyed). */
  readonly destroyed?: boolean;
  on(event: 'close', listener: () => void): unknown;
}

/** The parts of an Express response the notifier writes. */
export interface HttpResponse {
  status(code: number): HttpResponse;
  setHeader(name: string, value: string | string[]): unknown;
  getHeader(name: string): unknown;
  append(name: string, value: string): unknown;
  redirect(status: number, url: string): void;
  send(body: string | Buffer): unknown;
  write(chunk: string): boolean;
  end(chunk?: string): unknown;
  flushHeaders(): void;
  readonly writableEnded: boolean;
  /** Bytes written and not yet handed to the socket (the client is not reading fast enough). */
  readonly writableLength: number;
  /** The connection is gone (the client hung up, or the response was destroyed). */
  readonly destroyed: boolean;
  on(event: 'close', listener: () => void): unknown;
}
