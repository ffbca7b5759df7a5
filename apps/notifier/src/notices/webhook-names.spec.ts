import { loadNotifierConfig } from '../notifier.config';
import { derivedWebhookName, WebhookNames } from './webhook-names';
import { targetId } from './webhook-sender';

const secret = 'secret-0123456789abcdef';

describe('webhook names: what operators call a webhook beside its id', () => {
  it('a webhook without a name is named from its URL: host and path, never its user, password, query, fragment or a path segment that may be a secret', () => {
    expect(derivedWebhookName('https://chat.example/hooks/baton')).toBe('chat.example/hooks/baton');
    expect(derivedWebhookName('http://127.0.0.1:8080/baton?token=s3cr3t#x')).toBe('127.0.0.1:8080/baton');
    expect(derivedWebhookName('https://bot:hunter2@chat.example/hooks/')).toBe('chat.example/hooks');
    // Slack's and Discord's webhook URLs hold their secret in the path.
    expect(derivedWebhookName('https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX')).toBe('hooks.slack.com/services/***/***/***');
    expect(derivedWebhookName('https://discord.com/api/webhooks/123456789012345678/abcDEF-ghi_JKL')).toBe('discord.com/api/webhooks/***/***');
    expect(derivedWebhookName('https://chat.example/')).toBe('chat.example');
    const long = derivedWebhookName(`https://chat.example/${'abcdefg/'.repeat(20)}`);
    expect(long).toHaveLength(80);
    expect(long.endsWith('…')).toBe(true);
    for (const url of ['https://bot:hunter2@chat.example/hooks?key=hunter2', 'https://hooks.slack.com/services/T0/B0/hunter2hunter2hunter2'])
      expect(derivedWebhookName(url)).not.toContain('hunter2');
  });

  it('a configured name is used as given; two webhooks deriving one name each get the first 6 hex of their id; labels say name and id', () => {
    const targets = [
      { url: 'https://chat.example/hooks?team=a', secret },
      { url: 'https://chat.example/hooks?team=b', secret },
      { url: 'https://pager.example/v1/alerts', secret, name: 'pager' },
      { url: 'https://other.example/x', secret, name: 'chat.example/y' },
    ];
    const [a, b, pager] = targets.map((t) => targetId(t)) as [string, string, string];
    const names = new WebhookNames(targets);
    expect(names.list().map((w) => w.name)).toEqual([`chat.example/hooks~${a.slice(0, 6)}`, `chat.example/hooks~${b.slice(0, 6)}`, 'pager', 'chat.example/y']);
    expect(names.label(pager)).toBe(`pager [${pager}]`);
    expect(names.of('0000000000000000')).toBe('0000000000000000');
    expect(names.label('0000000000000000')).toBe('0000000000000000');
    expect(names.namesOf([pager, a])).toEqual({ [pager]: 'pager', [a]: `chat.example/hooks~${a.slice(0, 6)}` });
    const failure = { target: pager, reason: 'http_status' as const, error: 'HTTP 503', status: 503 };
    expect(names.failureText(failure)).toBe(`pager [${pager}] (http_status: HTTP 503)`);
    expect(names.named(failure)).toEqual({ ...failure, name: 'pager' });
  });

  it('NOTIFIER_WEBHOOKS takes an optional name: one token of letters, digits and . _ : @ / -, not an id, unique among the webhooks', () => {
    const load = (targets: unknown[]) => loadNotifierConfig({ NOTIFIER_WEBHOOKS: JSON.stringify(targets) }).NOTIFIER_WEBHOOKS;
    const refusal = (targets: unknown[]) => {
      try {
        load(targets);
        return null;
      } catch (error) {
        return (error as Error).message;
      }
    };
    expect(load([{ url: 'https://chat.example/h', secret, name: 'shop-chat' }])).toEqual([{ url: 'https://chat.example/h', secret, name: 'shop-chat' }]);
    expect(load([{ url: 'https://chat.example/h', secret }])).toEqual([{ url: 'https://chat.example/h', secret }]);
    for (const name of ['', 'two words', '-lead', 'a'.repeat(65), '0123456789abcdef', 'tab\there'])
      expect({ name, refused: refusal([{ url: 'https://chat.example/h', secret, name }]) }).toEqual({
        name,
        refused: expect.stringContaining('NOTIFIER_WEBHOOKS'),
      });
    expect(
      refusal([
        { url: 'https://a.example/h', secret, name: 'chat' },
        { url: 'https://b.example/h', secret, name: 'chat' },
      ]),
    ).toMatch(/NOTIFIER_WEBHOOKS.*webhook names are unique: "chat" is the name of webhook 0 too/s);
  });
});
