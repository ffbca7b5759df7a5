export * from './api-token';
export * from './api-token-store';
