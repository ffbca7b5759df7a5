export * from './processes';
export * from './deployment';
export * from './demo/scenarios';
// The tests' one poll-until-ready helper (libs/wait), for test/, bench/ and the demo.
export * from '@baton/wait';
export * from './auth-nats';
export { DEMO_MESH, demoDefinition } from './demo/definition';
export * from './claims';
export * from './cycle';
export * from './npm-start';
