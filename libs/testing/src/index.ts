export * from './processes';
export * from './deployment';
export * from './demo/scenarios';
export * from './wait';
export * from './auth-nats';
export { demoDefinition } from './demo/definition';
export * from './claims';
