/**
 * GET /me: who the platform takes the caller to be. The principal API Gateway authenticated, the team it maps to, whether
 * it is an admin, the user name its jobs are recorded under, the budget scopes a job of its would be charged to, and the
 * tiers it may submit to. The user name comes from an assumed role's session name, which the caller picks (README,
 * "Who a user is"), so this is where a researcher sees which `user:` budget their jobs meet. A principal in no team and
 * not an admin is refused here as on every route (403), with its ARN in the message.
 */
import { jobScopes } from '../../domain/budgets';
import type { ApiPlane } from '../plane';
import type { ApiRequest, ApiResponse, Route } from '../router';
import { noQuerySchema, parseRequest } from '../schemas';
import { tiersOf } from '../workload';

/** The route that describes the caller. */
export function meRoutes(plane: ApiPlane): Route[] {
  return [{ method: 'GET', path: '/me', handler: async (r) => describeCaller(plane, r) }];
}

function describeCaller(plane: ApiPlane, request: ApiRequest): ApiResponse {
  parseRequest(noQuerySchema, request.query, 'query');
  const { arn, team, admin, userName } = request.caller;
  return {
    status: 200,
    body: {
      principal: arn,
      team: team?.id ?? null,
      admin,
      user: userName,
      // A job's scopes without a project: `submit --project <name>` adds project:<team>/<name>.
      chargedTo: team ? jobScopes({ team: team.id, user: userName, project: undefined }) : [],
      tiers: team ? tiersOf(plane.config, team).map((tier) => tier.id) : [],
    },
  };
}
