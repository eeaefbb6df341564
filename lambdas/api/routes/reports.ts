/**
 * GET /reports/showback: what a team spent over a period of UTC days, per user, project, tier and job (domain/
 * showback.ts), computed from the job and attempt records when asked, with running attempts up to now. Without
 * `from` and `to` the period is the current month so far. A team member sees their own team; an admin names any
 * configured team with `team`. With `label`, only the jobs that match it count (what a sweep cost), and the report
 * says which label it was.
 */
import { buildTeamShowback, customPeriod } from '../../domain/showback';
import { badRequest, forbidden } from '../errors';
import type { ApiPlane } from '../plane';
import type { ApiRequest, ApiResponse, Route } from '../router';
import { parseRequest, showbackQuerySchema } from '../schemas';

/** Routes of reports. */
export function reportRoutes(plane: ApiPlane): Route[] {
  return [{ method: 'GET', path: '/reports/showback', handler: (r) => showback(plane, r) }];
}

/** The team a request reports on: the caller's own, or (admins only) the one it names. */
function reportTeam(plane: ApiPlane, request: ApiRequest, named: string | undefined): string {
  const own = request.caller.team?.id;
  if (named === undefined || named === own) {
    if (own === undefined) {
      throw badRequest(
        `principal ${request.caller.arn} is an admin outside any team: name the team with ?team=; teams: ${plane.config.teams.map((t) => t.id).join(', ')}`,
      );
    }
    return own;
  }
  if (!request.caller.admin) {
    throw forbidden(`principal ${request.caller.arn} may see team ${own ?? '(none)'}'s showback only, not ${named}'s`);
  }
  if (!plane.config.teams.some((t) => t.id === named)) {
    throw badRequest(`team "${named}" is not configured; teams: ${plane.config.teams.map((t) => t.id).join(', ')}`);
  }
  return named;
}

async function showback(plane: ApiPlane, request: ApiRequest): Promise<ApiResponse> {
  const query = parseRequest(showbackQuerySchema, request.query, 'query');
  const now = plane.clock();
  const today = now.toISOString().slice(0, 10);
  const period = customPeriod(query.from ?? `${today.slice(0, 8)}01`, query.to ?? today);
  const team = reportTeam(plane, request, query.team);
  const label = query.label;
  const jobs = await plane.jobs.jobsThatMayHaveRunIn(team, period, label && { labels: label.selectors });
  const report = buildTeamShowback(plane.config, team, period, jobs, now);
  return { status: 200, body: label === undefined ? report : { ...report, label: label.text } };
}
