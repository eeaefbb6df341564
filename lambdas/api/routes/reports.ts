/**
 * GET /reports/showback: what a team spent over a period of UTC days, per user, project, tier and job (domain/
 * showback.ts), computed from the job and attempt records when asked, with running attempts up to now. Without
 * `from` and `to` the period is the current month so far. A team member sees their own team; an admin names any
 * configured team with `team`. With `label`, only the jobs that match it count (what a sweep cost), and the report
 * says which label it was.
 */
import { buildTeamShowback, customPeriod, InvalidReportPeriod, parseDay } from '../../domain/showback';
import type { ApiPlane } from '../plane';
import { type ApiRequest, type ApiResponse, type Route, teamInView } from '../router';
import { parseRequest, showbackQuerySchema } from '../schemas';

/** Routes of reports. */
export function reportRoutes(plane: ApiPlane): Route[] {
  return [{ method: 'GET', path: '/reports/showback', handler: (r) => showback(plane, r) }];
}

async function showback(plane: ApiPlane, request: ApiRequest): Promise<ApiResponse> {
  const query = parseRequest(showbackQuerySchema, request.query, 'query');
  const now = plane.clock();
  const today = now.toISOString().slice(0, 10);
  // Without `from`, the month `to` falls in (this month without either): `to` alone names the month it ends. `to` is
  // checked first, so an error names what was given, and a `from` after today says that `to` was today by default.
  const to = query.to ?? today;
  const toMs = parseDay(to, 'to');
  const from = query.from ?? `${to.slice(0, 8)}01`;
  if (query.to === undefined && parseDay(from, 'from') > toMs) {
    throw new InvalidReportPeriod(`from (${from}) is after today (${today}), which to defaults to; give to as well`);
  }
  const period = customPeriod(from, to);
  const team = teamInView(plane.config.teams, request.caller, query.team, 'showback').id;
  const label = query.label;
  const jobs = await plane.jobs.jobsThatMayHaveRunIn(team, period, label && { labels: label.selectors });
  const report = buildTeamShowback(plane.config, team, period, jobs, now);
  return { status: 200, body: label === undefined ? report : { ...report, label: label.text } };
}
