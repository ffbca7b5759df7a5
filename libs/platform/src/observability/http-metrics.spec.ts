import { routeLabel } from './http-metrics';

describe('the route label of an HTTP request', () => {
  it('is the pattern of the route it matched, under its base URL', () => {
    expect(routeLabel({ method: 'GET', route: { path: '/v1/runs/:id' } })).toBe('/v1/runs/:id');
    expect(routeLabel({ method: 'GET', baseUrl: '/api', route: { path: '/runs/:id' } })).toBe('/api/runs/:id');
  });

  it('is unmatched without a route, and for a catch-all that middleware is bound to (a request no route matched)', () => {
    expect(routeLabel({ method: 'GET' })).toBe('unmatched');
    for (const path of ['{*path}', '/{*path}', '*', '/*', '(.*)', '/(.*)', '/v1/{*path}', 'v1/{*path}'])
      expect({ path, label: routeLabel({ method: 'GET', route: { path } }) }).toEqual({ path, label: 'unmatched' });
  });
});
