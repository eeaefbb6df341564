/**
 * Names of the Batch queues and job definitions the platform stack creates. The stack names them with these
 * functions and the lifecycle Lambdas submit to them by the same names, so no ARN map has to travel in env vars.
 */

/** Which kind of capacity a queue feeds. */
export type QueueCapacity = 'spot' | 'on-demand';

/** `<prefix>-<tier>-spot` / `<prefix>-<tier>-on-demand`. */
export function queueName(prefix: string, tierId: string, capacity: QueueCapacity): string {
  return `${prefix}-${tierId}-${capacity}`;
}

/** `<prefix>-<team>-<tier>`: one job definition per team (its job role) and tier (its resources). */
export function jobDefinitionName(prefix: string, teamId: string, tierId: string): string {
  return `${prefix}-${teamId}-${tierId}`;
}

/** `<jobId>-a<attempt>`: the Batch job name of an attempt. */
export function attemptJobName(jobId: string, attempt: number): string {
  return `${jobId}-a${attempt}`;
}
