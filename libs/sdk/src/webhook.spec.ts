import { createHmac } from 'node:crypto';
import { noticeDedupeKey, signWebhookPayload, verifyWebhookSignature, webhookDedupeKey, WebhookHeaders } from './webhook';

const secret = 'whsec-0123456789abcdef';
const body = JSON.stringify({ notice_id: 'nt-1', project: 'shop', headline: 'Refund 40 on 99 — approve or deny' });
const now = 1_800_000_000;

describe('verifyWebhookSignature: HMAC-SHA256 over timestamp and body', () => {
  it('accepts the signature the notifier computes: v1=hex(HMAC-SHA256(secret, "<timestamp>.<body>"))', () => {
    const expected = `v1=${createHmac('sha256', secret).update(`${now}.${body}`).digest('hex')}`;
    expect(signWebhookPayload(body, secret, now)).toBe(expected);
    const headers = { 'baton-signature': expected, 'baton-timestamp': String(now) };
    expect(verifyWebhookSignature(body, headers, secret, { nowSec: now + 10 })).toEqual({ ok: true, timestamp: now });
    // Bytes and fetch Headers work the same; header names are case-insensitive.
    const fetchHeaders = new Headers({ [WebhookHeaders.signature]: expected, [WebhookHeaders.timestamp]: String(now) });
    expect(verifyWebhookSignature(new TextEncoder().encode(body), fetchHeaders, secret, { nowSec: now }).ok).toBe(true);
    expect(verifyWebhookSignature(body, { 'Baton-Signature': expected, 'BATON-TIMESTAMP': String(now) }, secret, { nowSec: now }).ok).toBe(true);
  });

  it('refuses a changed body, another secret, or a changed timestamp (the timestamp is signed)', () => {
    const headers = { 'baton-signature': signWebhookPayload(body, secret, now), 'baton-timestamp': String(now) };
    expect(verifyWebhookSignature(`${body} `, headers, secret, { nowSec: now })).toEqual({ ok: false, reason: 'signature_mismatch' });
    expect(verifyWebhookSignature(body, headers, 'another-secret-123456', { nowSec: now })).toEqual({ ok: false, reason: 'signature_mismatch' });
    expect(verifyWebhookSignature(body, { ...headers, 'baton-timestamp': String(now + 1) }, secret, { nowSec: now })).toEqual({
      ok: false,
      reason: 'signature_mismatch',
    });
  });

  it('refuses a replay outside the tolerance window (default 300 s, either side)', () => {
    const headers = { 'baton-signature': signWebhookPayload(body, secret, now), 'baton-timestamp': String(now) };
    expect(verifyWebhookSignature(body, headers, secret, { nowSec: now + 301 })).toEqual({ ok: false, reason: 'timestamp_out_of_tolerance' });
    expect(verifyWebhookSignature(body, headers, secret, { nowSec: now - 301 })).toEqual({ ok: false, reason: 'timestamp_out_of_tolerance' });
    expect(verifyWebhookSignature(body, headers, secret, { nowSec: now + 3000, toleranceSec: 3600 }).ok).toBe(true);
  });

  it('accepts any one matching v1 signature (secret rotation) and refuses missing or malformed headers', () => {
    const good = signWebhookPayload(body, secret, now);
    const old = signWebhookPayload(body, 'old-secret-0123456789', now);
    expect(verifyWebhookSignature(body, { 'baton-signature': `${old}, ${good}`, 'baton-timestamp': String(now) }, secret, { nowSec: now }).ok).toBe(true);
    expect(verifyWebhookSignature(body, { 'baton-timestamp': String(now) }, secret, { nowSec: now })).toEqual({ ok: false, reason: 'missing_signature' });
    expect(verifyWebhookSignature(body, { 'baton-signature': good }, secret, { nowSec: now })).toEqual({ ok: false, reason: 'missing_timestamp' });
    expect(verifyWebhookSignature(body, { 'baton-signature': good, 'baton-timestamp': 'yesterday' }, secret, { nowSec: now })).toEqual({
      ok: false,
      reason: 'malformed_timestamp',
    });
    expect(verifyWebhookSignature(body, { 'baton-signature': 'v1=zz', 'baton-timestamp': String(now) }, secret, { nowSec: now })).toEqual({
      ok: false,
      reason: 'signature_mismatch',
    });
    expect(verifyWebhookSignature(body, { 'baton-signature': good.replace('v1=', 'v0='), 'baton-timestamp': String(now) }, secret, { nowSec: now })).toEqual({
      ok: false,
      reason: 'signature_mismatch',
    });
  });
});

describe('the dedupe key of a notice: the pair (project, notice id)', () => {
  it("is <project>:<notice_id> from the body or from the Baton-Project and Baton-Notice-Id headers, so two projects' notices of one id never share it", () => {
    expect(noticeDedupeKey({ project: 'shop', notice_id: 'nt-r-res-1' })).toBe('shop:nt-r-res-1');
    expect(noticeDedupeKey({ project: 'outlet', notice_id: 'nt-r-res-1' })).toBe('outlet:nt-r-res-1');
    expect(webhookDedupeKey({ 'baton-project': 'shop', 'baton-notice-id': 'nt-r-res-1' })).toBe('shop:nt-r-res-1');
    expect(webhookDedupeKey(new Headers({ [WebhookHeaders.project]: 'outlet', [WebhookHeaders.noticeId]: 'nt-m-r:2' }))).toBe('outlet:nt-m-r:2');
  });

  it('is null when a header is missing or empty (a notifier older than Baton-Project: use the body)', () => {
    expect(webhookDedupeKey({ 'baton-notice-id': 'nt-r-res-1' })).toBeNull();
    expect(webhookDedupeKey({ 'baton-project': 'shop' })).toBeNull();
    // NATS message headers answer '' for a header they do not hold.
    expect(webhookDedupeKey({ get: (name: string) => (name === WebhookHeaders.noticeId ? 'nt-r-res-1' : '') })).toBeNull();
  });
});
