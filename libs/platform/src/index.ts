export * from './config/config';
export * from './logging/logger';
export * from './health/health';
