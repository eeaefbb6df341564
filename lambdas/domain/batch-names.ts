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

/**
 * A team's fair-share identifier in Batch's scheduling policy and on every job it submits: its id without the '-',
 * since Batch takes only alphanumeric share identifiers (API reference, ShareAttributes: "limited to 255 alphanumeric
 * characters"). Configuration refuses two teams whose ids differ only in their '-'.
 */
export function shareIdentifierOf(teamId: string): string {
  return teamId.replaceAll('-', '');
}

/** `<jobId>-a<attempt>`: the Batch job name of an attempt. */
export function attemptJobName(jobId: string, attempt: number): string {
  return `${jobId}-a${attempt}`;
}

/** The awslogs stream prefix of a team's job definitions: its training logs are `<team>/…`. */
export function logStreamPrefix(team: string): string {
  return team;
}

/**
 * The log stream of a container a team's job definition ran as ECS task `taskId`: ECS names an awslogs stream
 * `<stream prefix>/<container name>/<task id>`, and Batch names a job's container `default`.
 */
export function containerLogStream(team: string, taskId: string): string {
  return `${logStreamPrefix(team)}/default/${taskId}`;
}
