export * from './wait';
