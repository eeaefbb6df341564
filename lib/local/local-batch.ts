/**
 * The contract between the local state-machine runner and local compute: exactly what Step Functions' Batch
 * integration (`arn:aws:states:::batch:submitJob.sync`) does on AWS. The RunAttempt Task's resolved Parameters are a
 * Batch SubmitJob request; on SUCCEEDED the task output is the job (PascalCase keys, as Step Functions returns it);
 * otherwise the task fails with `States.TaskFailed` and a Cause holding the FAILED job as JSON.
 */

import type { SubmitJobInput } from '../../lambdas/domain/submit-job';

export type { SubmitJobInput };

/** Local compute that runs one Batch job to its end. */
export interface LocalBatch {
  /** Resolves with the SUCCEEDED job; rejects with BatchTaskFailed for a FAILED one. */
  runJob(input: SubmitJobInput): Promise<Record<string, unknown>>;
}

/**
 * How a `.sync` Batch task fails: error `States.TaskFailed`, cause = the FAILED job as JSON. The state-machine
 * engine reports a caught error's message as its Cause, so the message is the JSON itself.
 */
export class BatchTaskFailed extends Error {
  override name = 'States.TaskFailed';
  constructor(override readonly cause: string) {
    super(cause);
  }
}
