/**
 * Headers on every response of a service's HTTP server, registered before anything reads the body:
 * `X-Content-Type-Options: nosniff` (a JSON or text body is never sniffed into something a browser
 * runs), and no `X-Powered-By`.
 */
export function securityHeaders(
  _req: unknown,
  res: { setHeader(name: string, value: string): void; removeHeader(name: string): void },
  next: () => void,
): void {
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.removeHeader('X-Powered-By');
  next();
}
