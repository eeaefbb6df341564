/**
 * What a Batch job that started is charged per node-hour: the spot price in effect on the instance it started on
 * (its type and zone, at its start), on-demand's for an on-demand instance, else the tier's configured price. Every
 * writer that records an attempt's start or, without one, its stop prices it here, so the figure does not depend on
 * which of Batch's events reached the platform (cost-model §2; DESIGN "Metering").
 */
import type { TierConfig } from '../../lib/config';
import { attemptPrice } from '../domain/attempt-cost';
import type { BatchJob } from '../domain/batch-job';
import type { AttemptRecord } from '../domain/job';
import type { ControlPlane } from './control-plane';
import { logger } from './logger';

type Fleet = Pick<ControlPlane, 'fleet'>;

/** The instance a Batch job ran on, from its container instance; undefined when unknown or the lookup failed. */
export async function instanceOfBatchJob(plane: Fleet, batchJob: BatchJob) {
  const containerInstanceArn =
    batchJob.container?.containerInstanceArn ?? batchJob.attempts.at(-1)?.container?.containerInstanceArn;
  if (!containerInstanceArn) return undefined;
  try {
    return await plane.fleet.instanceFor(containerInstanceArn);
  } catch (error) {
    logger.warn('container instance lookup failed; the start is recorded without its instance', {
      batchJobId: batchJob.jobId,
      containerInstanceArn,
      reason: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
    });
    return undefined;
  }
}

/** Price per node-hour of a Batch job that started on `instance` at `startedAt` (see the module comment). */
export async function startPrice(
  plane: Fleet,
  attempt: Pick<AttemptRecord, 'capacity'>,
  tier: TierConfig,
  instance: Awaited<ReturnType<ControlPlane['fleet']['instanceFor']>>,
  startedAt: number,
): Promise<number> {
  if (!instance) return attemptPrice({ capacity: attempt.capacity }, tier);
  if (instance.lifecycle === 'on-demand') return tier.onDemandUsdPerHour;
  try {
    const quoted = await plane.fleet.spotPriceAt(instance.instanceType, instance.availabilityZone, startedAt);
    return quoted ?? attemptPrice({ capacity: 'spot' }, tier);
  } catch (error) {
    // EC2 throttled past the SDK's retries: the start is recorded at the configured spot price rather than not at
    // all (an unrecorded start leaves the job WAITING, where budget-watch does not meter it).
    logger.warn('spot price history unavailable; the start is priced at the tier’s configured spot price', {
      instanceType: instance.instanceType,
      availabilityZone: instance.availabilityZone,
      reason: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
    });
    return attemptPrice({ capacity: 'spot' }, tier);
  }
}

/**
 * The price of an attempt whose stop is about to be recorded: its recorded start price, else (the start was never
 * recorded: Batch's RUNNING event was lost) the start's price from the Batch job, as the start would have been
 * priced; undefined when the Batch job never started.
 */
export async function priceForStop(
  plane: Fleet,
  attempt: Pick<AttemptRecord, 'capacity' | 'usdPerHour'>,
  tier: TierConfig,
  batchJob: BatchJob,
): Promise<number | undefined> {
  if (attempt.usdPerHour !== undefined) return attempt.usdPerHour;
  const startedAt = batchJob.startedAt ?? batchJob.attempts.find((a) => a.startedAt !== undefined)?.startedAt;
  if (startedAt === undefined) return undefined;
  return startPrice(plane, attempt, tier, await instanceOfBatchJob(plane, batchJob), startedAt);
}
