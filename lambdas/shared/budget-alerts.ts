/**
 * Budget alerts, sent at least once.
 * - `Budget Threshold Crossed`: a ledger write that crosses a threshold records a marker (once per scope, month and
 *   threshold: of concurrent writers exactly one records it) and reports the crossing to that write alone. That
 *   writer publishes the events and then marks the crossings published.
 * - `Budget Exhausted`: budget-watch records the exhaustion (scope, month, limit and the jobs it pauses) in the
 *   ledger before it stops the jobs, publishes it after, then marks it published.
 * A writer that fails between recording and marking (PutEvents throttled, the function timed out) leaves the marker
 * unpublished, and budget-watch publishes it on a later tick, as of when it was recorded and with the event id it
 * would have had, so a consumer that keeps ids drops the rare duplicate.
 * Also here, as a ledger write whose crossings it publishes: the top-up a paused job takes before it resumes
 * (`reserveToFinish`), which the API and budget-watch share.
 */
import { UnknownBudgetJob } from '../domain/budgets';
import { buildEvent, thresholdCrossedEvents } from '../domain/events';
import type { JobRecord } from '../domain/job';
import { costToFinishUsd } from '../domain/watch';
import type { ControlPlane } from './control-plane';
import type { Exhaustion, ThresholdCrossing, TopUpResult } from './ledger';
import { logger } from './logger';

type AlertPlane = Pick<ControlPlane, 'config' | 'ledger' | 'events'>;

/**
 * How long after it was recorded an unpublished crossing counts as left behind rather than on its way: a writer
 * publishes within milliseconds of recording, and budget-watch should not race it into a duplicate alert.
 */
export const UNPUBLISHED_GRACE_MS = 60_000;

/**
 * Publishes the events of crossings a ledger write reported that are not out yet, then marks them published; returns
 * how many. A replayed write (a cost gate or Finalize retried after its alerts went out) reports the same crossings
 * again: their markers say they are out, and nothing is sent twice.
 */
export async function publishCrossings(
  plane: AlertPlane,
  crossings: readonly ThresholdCrossing[],
  occurredAt: string,
): Promise<number> {
  if (crossings.length === 0) return 0;
  const due = await plane.ledger.unpublished(crossings);
  if (due.length === 0) return 0;
  await plane.events.publish(thresholdCrossedEvents(due, plane.config.budgets, occurredAt));
  await plane.ledger.markPublished(due);
  return due.length;
}

/** Publishes an exhaustion's `Budget Exhausted` as of when it was recorded, then marks it published. */
export async function publishExhaustion(plane: AlertPlane, exhaustion: Exhaustion): Promise<void> {
  const { at, published: _published, pausedJobIds, ...figures } = exhaustion;
  await plane.events.publish([
    buildEvent('Budget Exhausted', { ...figures, pausedJobIds: [...pausedJobIds], occurredAt: at }),
  ]);
  await plane.ledger.markExhaustionPublished(exhaustion);
}

/**
 * Publishes the crossings and exhaustions of `teams` in `periods` that were recorded at least
 * {@link UNPUBLISHED_GRACE_MS} before `nowMs` and never marked published, each as occurring when it was recorded;
 * returns how many events it published.
 */
export async function publishLeftBehind(
  plane: AlertPlane,
  teams: readonly string[],
  periods: readonly string[],
  nowMs: number,
): Promise<number> {
  let published = 0;
  for (const team of teams) {
    for (const period of periods) {
      const { crossings, exhaustions } = await plane.ledger.unpublishedAlerts(team, period);
      for (const { crossing, at } of crossings) {
        if (Date.parse(at) > nowMs - UNPUBLISHED_GRACE_MS) continue;
        published += await publishCrossings(plane, [crossing], at);
      }
      for (const exhaustion of exhaustions) {
        if (Date.parse(exhaustion.at) > nowMs - UNPUBLISHED_GRACE_MS) continue;
        await publishExhaustion(plane, exhaustion);
        published += 1;
      }
    }
  }
  return published;
}

/**
 * Before a paused job resumes (POST /jobs/{id}/resume, or budget-watch once its budget allows): its reservation is
 * raised to what it is forecast to cost from here (`costToFinishUsd`), in every scope, with the crossings that
 * raises published. Throws BudgetExceeded, having raised nothing, when a scope cannot cover it: the job stays paused.
 */
export async function reserveToFinish(
  plane: AlertPlane,
  job: Pick<JobRecord, 'jobId' | 'estimate' | 'progress' | 'costSoFarUsd'>,
  occurredAt: string,
): Promise<TopUpResult> {
  let topUp: TopUpResult;
  try {
    topUp = await plane.ledger.reserveTo(job.jobId, costToFinishUsd(job));
  } catch (error) {
    if (!(error instanceof UnknownBudgetJob)) throw error;
    // Never reserved (its cost gate did not run): nothing is held for it, so there is nothing to raise either.
    logger.warn('a paused job without a reservation resumes with none', { jobId: job.jobId });
    return { jobId: job.jobId, raised: [], crossings: [] };
  }
  await publishCrossings(plane, topUp.crossings, occurredAt);
  return topUp;
}
