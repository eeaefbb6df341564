/**
 * The scheduled showback reports (EventBridge schedules: daily and weekly, each delivering `{ report, time }`).
 *
 * For the last complete period as of the schedule's `time` (domain/showback.ts `completedPeriod`):
 * 1. each configured team: its jobs that may have run in the period (the byTeam index, created before the period's
 *    end; ended ones only if they changed after it began), their attempts, and the team's showback, written to the
 *    workspace as `reports/<kind>/<first day>/teams/<team>.json` and `.csv`;
 * 2. the all-teams rollup, `reports/<kind>/<first day>/all-teams.json`, once every team's report is written;
 * 3. a `Cost Report Ready` event for each report written, after its object, so a consumer that reads the event finds
 *    the report.
 *
 * Replays: the period and the figures' time come from the schedule's `time`, not the clock, so a redelivered run
 * writes the same objects (late attempt records make a rerun's figures newer, never lost). Each announcement is
 * recorded in the jobs table once (`JobStore.recordReportAnnounced`); a run that finds it publishes nothing, so a
 * retry does not e-mail the team leads twice. An event whose record could not be written after publishing (a crash
 * between the two) is published again by the retry, with the same deterministic `eventId`.
 * A team that fails does not stop the others; the run then fails with {@link ReportsIncomplete} naming them, without
 * the all-teams rollup, so the Errors alarm fires and EventBridge retries.
 */
import * as z from 'zod/mini';
import { buildEvent } from '../domain/events';
import {
  type AllTeamsShowback,
  buildAllTeamsShowback,
  buildTeamShowback,
  completedPeriod,
  REPORT_KINDS,
  type ReportKind,
  type ReportPeriod,
  showbackCsv,
  type TeamShowback,
} from '../domain/showback';
import { allTeamsReportKey, s3Uri, teamReportKeys } from '../domain/workspace-layout';
import { describeIssues } from '../domain/zod-issues';
import type { ControlPlane } from '../shared/control-plane';
import { logger } from '../shared/logger';

/** What each schedule delivers: the report and the schedule's time (EventBridge `<aws.events.event.time>`). */
export const reportsInputSchema = z.strictObject({
  report: z.enum(REPORT_KINDS),
  time: z.iso.datetime({ offset: true }),
});

/** The input is not `{ report, time }`; the message says what is wrong. */
export class InvalidReportsInput extends Error {
  override name = 'InvalidReportsInput';
}

/** Raised at the end of a run in which some teams' reports could not be made; names each team and why. */
export class ReportsIncomplete extends Error {
  override name = 'ReportsIncomplete';
}

/** One report the run wrote. */
export interface WrittenReport {
  /** The team, or undefined for the all-teams rollup. */
  readonly team?: string;
  readonly uri: string;
  readonly totalUsd: number;
  readonly jobs: number;
  /** Whether this run published its `Cost Report Ready` (false: an earlier run did). */
  readonly announced: boolean;
}

/** What one run did. */
export interface ReportsResult {
  readonly report: ReportKind;
  readonly periodStart: string;
  readonly periodEnd: string;
  readonly written: WrittenReport[];
}

type Plane = Pick<ControlPlane, 'config' | 'jobs' | 'workspace' | 'events'>;

/** Builds the reports function from the parts of the control plane it uses. */
export function createReportsHandler(plane: Plane) {
  async function announce(
    kind: ReportKind,
    period: ReportPeriod,
    report: TeamShowback | AllTeamsShowback,
    uri: string,
    time: string,
  ): Promise<boolean> {
    const team = 'team' in report ? report.team : undefined;
    const ref = { kind, periodStart: period.start, ...(team === undefined ? {} : { team }) };
    if (await plane.jobs.reportAnnounced(ref)) return false;
    const entry = buildEvent('Cost Report Ready', {
      occurredAt: new Date(time).toISOString(),
      report: kind,
      periodStart: period.start,
      periodEnd: period.end,
      ...(team === undefined ? {} : { team }),
      uri,
      totalUsd: report.totals.costUsd,
      jobs: report.totals.jobs,
    });
    await plane.events.publish([entry]);
    const { eventId } = JSON.parse(entry.Detail) as { eventId: string };
    await plane.jobs.recordReportAnnounced(ref, {
      uri,
      totalUsd: report.totals.costUsd,
      jobs: report.totals.jobs,
      eventId,
    });
    return true;
  }

  return async (input: unknown): Promise<ReportsResult> => {
    const parsed = reportsInputSchema.safeParse(input);
    if (!parsed.success) {
      throw new InvalidReportsInput(
        `invalid reports input: ${describeIssues(parsed.error.issues)}; expected { "report": "daily" | "weekly", "time": ISO 8601 }`,
      );
    }
    const { report: kind, time } = parsed.data;
    const asOf = new Date(time);
    const period = completedPeriod(kind, asOf);
    const written: WrittenReport[] = [];
    const teams: TeamShowback[] = [];
    const failures: string[] = [];

    for (const team of plane.config.teams) {
      try {
        const report = buildTeamShowback(
          plane.config,
          team.id,
          period,
          await plane.jobs.jobsThatMayHaveRunIn(team.id, period),
          asOf,
        );
        const keys = teamReportKeys(kind, period.start, team.id);
        await plane.workspace.put(keys.json, JSON.stringify(report, null, 2), 'application/json');
        await plane.workspace.put(keys.csv, showbackCsv(report), 'text/csv; charset=utf-8');
        const uri = s3Uri(plane.workspace.bucket, keys.json);
        const announced = await announce(kind, period, report, uri, time);
        teams.push(report);
        written.push({ team: team.id, uri, totalUsd: report.totals.costUsd, jobs: report.totals.jobs, announced });
      } catch (error) {
        const e = error instanceof Error ? error : new Error(String(error));
        logger.error('showback report failed for a team', { team: team.id, error: `${e.name}: ${e.message}` });
        failures.push(`${team.id}: ${e.name}: ${e.message}`);
      }
    }
    if (failures.length > 0) {
      throw new ReportsIncomplete(
        `${kind} report for ${period.start}..${period.end}: ${failures.length} of ${plane.config.teams.length} team(s) failed (${failures.join('; ')}); the all-teams report waits for them`,
      );
    }

    const all = buildAllTeamsShowback(period, teams, asOf);
    const key = allTeamsReportKey(kind, period.start);
    await plane.workspace.put(key, JSON.stringify(all, null, 2), 'application/json');
    const uri = s3Uri(plane.workspace.bucket, key);
    const announced = await announce(kind, period, all, uri, time);
    written.push({ uri, totalUsd: all.totals.costUsd, jobs: all.totals.jobs, announced });
    logger.info('showback reports written', { report: kind, periodStart: period.start, reports: written.length });
    return { report: kind, periodStart: period.start, periodEnd: period.end, written };
  };
}
