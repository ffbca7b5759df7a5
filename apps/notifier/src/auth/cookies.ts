import { setOwn } from '@baton/contracts';

/** The browser session cookie (HttpOnly, SameSite=Strict). */
export const SESSION_COOKIE = 'baton_session';
/** The login form's double-submit CSRF cookie (HttpOnly, SameSite=Strict, path /login). */
export const LOGIN_CSRF_COOKIE = 'baton_login_csrf';

/** Parse a `Cookie` header into name → value (first occurrence wins; values are URI-decoded when possible). */
export function parseCookies(header: string | undefined): Record<string, string> {
  const cookies: Record<string, string> = {};
  if (!header) return cookies;
  for (const part of header.split(';')) {
    const index = part.indexOf('=');
    if (index <= 0) continue;
    const name = part.slice(0, index).trim();
    if (Object.hasOwn(cookies, name)) continue;
    const raw = part.slice(index + 1).trim();
    let value = raw;
    try {
      value = decodeURIComponent(raw);
    } catch {
      // not URI-encoded: kept as sent
    }
    setOwn(cookies, name, value);
  }
  return cookies;
}

export interface CookieOptions {
  /** Seconds; 0 deletes the cookie. */
  maxAge: number;
  path?: string;
  secure: boolean;
}

/** A `Set-Cookie` value that is always HttpOnly and SameSite=Strict. */
export function serializeCookie(name: string, value: string, options: CookieOptions): string {
  const parts = [
    `${name}=${encodeURIComponent(value)}`,
    `Path=${options.path ?? '/'}`,
    `Max-Age=${Math.max(0, Math.floor(options.maxAge))}`,
    'HttpOnly',
    'SameSite=Strict',
  ];
  if (options.secure) parts.push('Secure');
  return parts.join('; ');
}
