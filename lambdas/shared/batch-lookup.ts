/**
 * Looking an attempt's Batch job up (DescribeJobs, or ListJobs by name): how the lifecycle ends an attempt whose task
 * failed or whose job ended, and how budget-watch learns of a start whose Batch event never arrived.
 */
import type { BatchJob } from '../domain/batch-job';
import { attemptJobName } from '../domain/batch-names';
import type { AttemptRecord, JobRecord } from '../domain/job';
import type { ControlPlane } from './control-plane';

/** Raised when the Batch port cannot look jobs up (a wiring error: the AWS and local ports can). */
export class BatchLookupUnavailable extends Error {
  override name = 'BatchLookupUnavailable';
}

/** An attempt's Batch job: by its recorded id, else the newest of its name in its queue; undefined if Batch has none. */
export async function lookUpAttempt(
  plane: Pick<ControlPlane, 'batch'>,
  job: Pick<JobRecord, 'jobId'>,
  attempt: Pick<AttemptRecord, 'attempt' | 'batchJobId' | 'queue'>,
): Promise<BatchJob | undefined> {
  if (!plane.batch.lookupJob) {
    throw new BatchLookupUnavailable('the Batch port cannot look jobs up (lookupJob)');
  }
  return plane.batch.lookupJob({
    ...(attempt.batchJobId ? { batchJobId: attempt.batchJobId } : {}),
    queue: attempt.queue,
    jobName: attemptJobName(job.jobId, attempt.attempt),
  });
}
