export * from './api-token';
export * from './api-token-store';
export * from './token-key';
export * from './token-revocations';
