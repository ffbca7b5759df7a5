export * from './refused-letter-cap';
export * from './refused-letters';
