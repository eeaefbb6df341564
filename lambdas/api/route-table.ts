/**
 * The API's routes as method + path, shared by the handler's router (lambdas/api/app.ts) and the CDK construct that
 * declares them on API Gateway (lib/api/http-api.ts), so the two cannot drift. Pure data: the construct imports it
 * without pulling in handler code.
 */

/** One route key: method and HTTP API path template (`{name+}` is greedy). */
export interface RouteKey {
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  readonly path: string;
}

/** Every route the API serves. */
export const API_ROUTES: readonly RouteKey[] = [
  { method: 'GET', path: '/me' },
  { method: 'GET', path: '/tiers' },
  { method: 'POST', path: '/estimate' },
  { method: 'GET', path: '/budgets' },
  { method: 'PUT', path: '/budgets/{scope+}' },
  { method: 'POST', path: '/uploads' },
  { method: 'POST', path: '/jobs' },
  { method: 'GET', path: '/jobs' },
  { method: 'GET', path: '/jobs/{id}' },
  { method: 'DELETE', path: '/jobs/{id}' },
  { method: 'POST', path: '/jobs/{id}/resume' },
  { method: 'GET', path: '/jobs/{id}/checkpoints' },
  { method: 'GET', path: '/jobs/{id}/logs' },
  { method: 'GET', path: '/reports/showback' },
];
