export * from './processes';
export * from './deployment';
export * from './demo/scenarios';
export * from './wait';
