/**
 * Budget threshold alerts, sent at least once. A ledger write that crosses a threshold records a marker (once per
 * scope, month and threshold: of concurrent writers exactly one records it) and reports the crossing to that write
 * alone. That writer publishes the `Budget Threshold Crossed` events and then marks the crossings published. A writer
 * that fails between the two (PutEvents throttled, the function timed out) leaves the marker unpublished, and
 * budget-watch publishes it on a later tick, with the event id it would have had, so a consumer that keeps ids drops
 * the rare duplicate.
 */
import { thresholdCrossedEvents } from '../domain/events';
import type { ControlPlane } from './control-plane';
import type { ThresholdCrossing } from './ledger';

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

/**
 * Publishes the crossings of `teams` in `periods` that were recorded at least {@link UNPUBLISHED_GRACE_MS} before
 * `nowMs` and never marked published, each as occurring when it was recorded; returns how many.
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
      for (const { crossing, at } of await plane.ledger.unpublishedCrossings(team, period)) {
        if (Date.parse(at) > nowMs - UNPUBLISHED_GRACE_MS) continue;
        published += await publishCrossings(plane, [crossing], at);
      }
    }
  }
  return published;
}
