import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { Inject, Injectable, type OnApplicationBootstrap } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { NOTIFIER_CONFIG, type NotifierConfig } from '../notifier.config';

/** The limits {@link applyServerLimits} puts on the notifier's HTTP server. */
export interface ServerLimits {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  maxConnections: number;
}

export function limitsOf(config: NotifierConfig): ServerLimits {
  return {
    headersTimeoutMs: config.NOTIFIER_HTTP_HEADERS_TIMEOUT_MS,
    requestTimeoutMs: Math.max(config.NOTIFIER_HTTP_REQUEST_TIMEOUT_MS, config.NOTIFIER_HTTP_HEADERS_TIMEOUT_MS),
    keepAliveTimeoutMs: config.NOTIFIER_HTTP_KEEPALIVE_TIMEOUT_MS,
    maxConnections: config.NOTIFIER_HTTP_MAX_CONNECTIONS,
  };
}

/**
 * Put the limits on a Node HTTP server before it listens:
 *
 * - `headersTimeout` / `requestTimeout`: a request whose headers (whole request) take longer is
 *   answered 408 and its socket closed — a slow-loris sending headers byte by byte is dropped
 *   after the headers timeout. Node checks every `connectionsCheckingInterval` (read when the
 *   server starts listening), set here to a quarter of the headers timeout, at most 1 s;
 * - a connection that sends no complete request within the headers timeout (plus two checking
 *   intervals; an idle socket, which Node's checks never see because no request began) is closed;
 * - `keepAliveTimeout`: an idle keep-alive connection closes after it;
 * - `maxConnections`: past it a new connection is closed at once (no file descriptor is held).
 *
 * Live event streams are unaffected: their request is complete, and their heartbeat keeps them
 * from being idle.
 */
export function applyServerLimits(server: Server, limits: ServerLimits): void {
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  server.maxConnections = limits.maxConnections;
  const checkEvery = Math.max(50, Math.min(1000, Math.floor(limits.headersTimeoutMs / 4)));
  (server as Server & { connectionsCheckingInterval: number }).connectionsCheckingInterval = checkEvery;
  // Past Node's own check (which answers a request that began too slowly with 408), so this one
  // closes only connections on which no request began at all.
  const idleMs = limits.headersTimeoutMs + 2 * checkEvery;
  const firstRequest = new WeakMap<Socket, NodeJS.Timeout>();
  server.on('connection', (socket: Socket) => {
    const timer = setTimeout(() => socket.destroy(), idleMs);
    timer.unref();
    firstRequest.set(socket, timer);
    socket.once('close', () => clearTimeout(timer));
  });
  server.on('clientError', answerClientError);
  server.on('request', (req: { socket: Socket }) => {
    const timer = firstRequest.get(req.socket);
    if (timer === undefined) return;
    clearTimeout(timer);
    firstRequest.delete(req.socket);
  });
}

/** What a request Node's parser refused is answered: its status, code and message. */
const CLIENT_ERRORS: Record<string, [number, string, string, string]> = {
  HPE_HEADER_OVERFLOW: [431, 'Request Header Fields Too Large', 'headers_too_large', 'the request headers are larger than the server takes (16 KiB)'],
  HPE_CHUNK_EXTENSIONS_OVERFLOW: [413, 'Payload Too Large', 'payload_too_large', 'the chunk extensions are larger than the server takes'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout', 'request_timeout', 'the request was not received in time'],
};
const MALFORMED: [number, string, string, string] = [400, 'Bad Request', 'malformed_request', 'the request is not valid HTTP/1.1'];

/**
 * Node answers a request its parser refuses (headers over 16 KiB, a malformed request line, a
 * request too slow to arrive) with a bare status line. This answers it like every other refusal
 * of the API — a JSON `{ error: { code, message, issues } }` with its status — then closes the
 * connection. Nothing is written when a response is already under way on the socket (a pipelined
 * request), nor to a socket the client has closed.
 */
export function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  const pending = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && error.code !== 'ECONNRESET' && !pending?.headersSent) {
    const [status, reason, code, message] = (error.code !== undefined ? CLIENT_ERRORS[error.code] : undefined) ?? MALFORMED;
    const body = JSON.stringify({ error: { code, message, issues: [] } });
    socket.write(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

/**
 * Applies {@link applyServerLimits} to the notifier's HTTP server when the application boots
 * (before it listens), and stops Express from announcing itself (`X-Powered-By`).
 */
@Injectable()
export class HttpServerLimits implements OnApplicationBootstrap {
  constructor(
    private readonly adapterHost: HttpAdapterHost,
    @Inject(NOTIFIER_CONFIG) private readonly config: NotifierConfig,
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
  ) {}

  onApplicationBootstrap(): void {
    const adapter = this.adapterHost.httpAdapter;
    if (!adapter) return;
    const server = adapter.getHttpServer() as Server | undefined;
    const limits = limitsOf(this.config);
    if (server) applyServerLimits(server, limits);
    const express = adapter.getInstance() as { disable?: (setting: string) => void; set?: (setting: string, value: unknown) => void };
    express.disable?.('x-powered-by');
    express.set?.('trust proxy', this.config.NOTIFIER_TRUST_PROXY);
    this.runtime.logger.debug('http server limits', { ...limits, trustProxy: this.config.NOTIFIER_TRUST_PROXY });
  }
}
