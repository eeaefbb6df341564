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
 */
import { buildEvent, thresholdCrossedEvents } from '../domain/events';
import type { ControlPlane } from './control-plane';
import type { Exhaustion, ThresholdCrossing } from './ledger';

type AlertPlane = Pick<ControlPlane, 'config' | 'ledger' | 'events'>;

/**
 * How long after it was recorded an unpublished crossing counts as left behind rather than on its way: a writer
 * publishes within milliseconds of recording, and budget-watch should not race it into a duplicate alert.
 */
export const UNPUBLISHED_GRACE_MS = 60_000;

/** Publishes the events of crossings a ledger write reported, then marks them published; returns how many. */
export async function publishCrossings(
  plane: AlertPlane,
  crossings: readonly ThresholdCrossing[],
  occurredAt: string,
): Promise<number> {
  if (crossings.length === 0) return 0;
  await plane.events.publish(thresholdCrossedEvents(crossings, plane.config.budgets, occurredAt));
  await plane.ledger.markPublished(crossings);
  return crossings.length;
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
