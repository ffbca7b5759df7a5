export * from './config/config';
export * from './logging/logger';
export * from './health/health';
export * from './service/runtime';
export * from './service/bootstrap';
export * from './transport';
export * from './clients';
export * from './observability';
