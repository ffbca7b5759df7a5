import { defaultInstance } from './runtime';

describe('a process name when BATON_INSTANCE is unset', () => {
  it('is <service>-<host>-<pid>: the host name up to its first dot, letters, digits, _ and - only, at most 40 of them', () => {
    expect(defaultInstance('router', 'router-7c9f.prod.example.com', 1)).toBe('router-router-7c9f-1');
    expect(defaultInstance('ledger', 'Büro_Box', 42)).toBe('ledger-Bro_Box-42');
    expect(defaultInstance('notifier', 'x'.repeat(60), 7)).toBe(`notifier-${'x'.repeat(40)}-7`);
  });

  it('without a usable host name it is <service>-<pid>', () => {
    expect(defaultInstance('watchdog', '', 9)).toBe('watchdog-9');
    expect(defaultInstance('watchdog', '.local', 9)).toBe('watchdog-9');
  });
});
