/** GET /budgets (the caller's team, or any team for an admin; any month) and PUT /budgets/{scope} (admins). */
import { formatScope, parseScope, periodOf } from '../../domain/budgets';
import { publishCrossings } from '../../shared/budget-alerts';
import { badRequest, forbidden } from '../errors';
import type { ApiPlane } from '../plane';
import { type ApiRequest, type ApiResponse, type Route, requiredJsonBody, teamInView } from '../router';
import { budgetsQuerySchema, noQuerySchema, parseRequest, setBudgetRequestSchema } from '../schemas';

/** Routes of budgets. */
export function budgetRoutes(plane: ApiPlane): Route[] {
  return [
    { method: 'GET', path: '/budgets', handler: (r) => listBudgets(plane, r) },
    // Greedy: user and project scopes hold a '/' (`user:nlp/alice`), sent raw or as %2F.
    { method: 'PUT', path: '/budgets/{scope+}', handler: (r) => setBudget(plane, r) },
  ];
}

async function listBudgets(plane: ApiPlane, request: ApiRequest): Promise<ApiResponse> {
  const query = parseRequest(budgetsQuerySchema, request.query, 'query');
  const team = teamInView(plane.config.teams, request.caller, query.team, 'budgets');
  const current = periodOf(plane.clock());
  const period = query.period ?? current;
  // The team scope always has a budget this month: create it with the configured monthly amount on first sight.
  // Other months are read as they are: a past month keeps what it had, and a later one opens with the amount the
  // config holds when it begins, not the one it holds now.
  if (period === current) await plane.ledger.ensureBudget(formatScope('team', team.id), period, team.monthlyBudgetUsd);
  const budgets = await plane.ledger.listScopes(team.id, period);
  return { status: 200, body: { team: team.id, period, budgets } };
}

async function setBudget(plane: ApiPlane, request: ApiRequest): Promise<ApiResponse> {
  if (!request.caller.admin) {
    throw forbidden(`principal ${request.caller.arn} is not a Trainyard admin; only admins may change budgets`);
  }
  const scope = parseScope(request.params.scope ?? '');
  parseRequest(noQuerySchema, request.query, 'query');
  if (!plane.config.teams.some((t) => t.id === scope.team)) {
    throw badRequest(
      `scope ${scope.text} names team "${scope.team}", which is not configured; teams: ${plane.config.teams.map((t) => t.id).join(', ')}`,
    );
  }
  const body = parseRequest(setBudgetRequestSchema, requiredJsonBody(request), 'body');
  const period = body.period ?? periodOf(plane.clock());
  await plane.ledger.ensureBudget(scope.text, period, body.limitUsd);
  const { usage, crossings } = await plane.ledger.setLimit(scope.text, period, body.limitUsd);
  // A lower limit can cross a threshold; the ledger tells only this write, so the alert goes out from here.
  await publishCrossings(plane, crossings, plane.clock().toISOString());
  return { status: 200, body: { budget: usage, crossings } };
}
