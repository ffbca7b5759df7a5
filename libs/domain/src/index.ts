export * from './decider';
export * from './routing';
export * from './run';
export * from './notices';
export * from './team-context';
export * from './handoff';
export * from './stop';
