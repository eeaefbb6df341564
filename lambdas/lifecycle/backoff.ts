/**
 * Backoff (a waitForTaskToken Task whose timeout is the retry's delay, `$.plan.delaySeconds`): the job sits out the
 * wait before its next attempt. The Task's token is recorded on the job (`pauseToken`, as a budget pause records
 * its own), so a cancel sends it task success and the job ends at once, not when the wait is over (a retry's backoff
 * is up to an hour). When the delay runs out the Task times out, and the state machine takes the timeout to
 * PrepareAttempt, as it takes a cancel. A cancel that arrived before the token was stored is honoured here.
 */
import { isTerminal } from '../domain/job';
import type { ControlPlane } from '../shared/control-plane';
import { logger } from '../shared/logger';
import { backoffInputSchema, parseStep } from './steps';

/** What the Backoff Task's token is sent when the wait ends early. */
export const BACKOFF_CANCELLED = { action: 'cancel' } as const;

/** Creates the Backoff step. */
export function createBackoffHandler(plane: Pick<ControlPlane, 'jobs' | 'lifecycle'>) {
  return async (input: unknown): Promise<{ jobId: string; waiting: boolean }> => {
    const { jobId, taskToken, delaySeconds } = parseStep(backoffInputSchema, 'Backoff', input);
    const job = await plane.jobs.requireJob(jobId);
    // Ended by other means (the execution-ended rule settled it): nothing to wait for; PrepareAttempt finalizes.
    if (isTerminal(job.state)) {
      await plane.lifecycle.sendTaskSuccess(taskToken, BACKOFF_CANCELLED);
      return { jobId, waiting: false };
    }
    const waiting = await plane.jobs.patchJob(jobId, { pauseToken: taskToken });
    if (waiting.cancelRequested) {
      await plane.lifecycle.sendTaskSuccess(taskToken, BACKOFF_CANCELLED);
      return { jobId, waiting: false };
    }
    logger.info('job waits before its next attempt', { jobId, delaySeconds });
    return { jobId, waiting: true };
  };
}
