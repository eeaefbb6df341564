/**
 * The execution state that flows between the job state machine's Tasks, with a zod schema for each step's input.
 * Everything durable lives in DynamoDB; the state only carries what the next Choice needs and the next attempt's
 * plan, so a replayed Task recomputes the same answer from the same records.
 */
import * as z from 'zod/mini';
import { JOB_ID_PATTERN } from '../domain/job';
import { describeIssues } from '../domain/zod-issues';

const jobId = z.string().check(z.regex(JOB_ID_PATTERN, 'must be a Trainyard job id'));
const capacity = z.enum(['spot', 'on-demand']);

/** Where the state machine goes after a step. */
export const NEXT_STEPS = ['cost-gate', 'prepare', 'wait', 'run', 'pause', 'finalize'] as const;
/** One of NEXT_STEPS. */
export type NextStepName = (typeof NEXT_STEPS)[number];

/** The plan for the next attempt. */
export const attemptPlanSchema = z.object({
  attempt: z.int().check(z.positive()),
  capacity,
  /** Restore the newest checkpoint and append the job's resume arguments. */
  resume: z.boolean(),
  delaySeconds: z.int().check(z.nonnegative()),
});
/** The plan for the next attempt. */
export type AttemptPlan = z.output<typeof attemptPlanSchema>;

/** Input of Analyze: the execution input. */
export const analyzeInputSchema = z.looseObject({ jobId });

/** Input of CostGate: Analyze's output. */
export const costGateInputSchema = z.looseObject({ jobId, reservationUsd: z.number().check(z.nonnegative()) });

/** Input of PrepareAttempt: a plan from CostGate or AttemptOutcome (possibly after a wait or a pause). */
export const prepareInputSchema = z.looseObject({ jobId, plan: attemptPlanSchema });

/** Input of AttemptOutcome: the prepared attempt plus Batch's result or the caught error. */
export const attemptOutcomeInputSchema = z.looseObject({
  jobId,
  plan: attemptPlanSchema,
  batch: z.optional(z.unknown()),
  batchError: z.optional(z.object({ Error: z.string(), Cause: z.optional(z.string()) })),
});

const taskToken = z.string().check(z.minLength(1));

/** Input of the pause step (waitForTaskToken). */
export const pauseInputSchema = z.looseObject({ jobId, taskToken });

/** Input of the Backoff step (waitForTaskToken, timing out after the delay). */
export const backoffInputSchema = z.looseObject({ jobId, taskToken, delaySeconds: z.int().check(z.positive()) });

/**
 * Why a job ends FAILED when no attempt's outcome says so: `timed-out`, its deadline passed or its tier's maximum
 * runtime was used up between two attempts (`Job Failed`'s outcome, which the newest attempt's would otherwise give).
 */
export const FAILED_AS = ['timed-out'] as const;
export type FailedAs = (typeof FAILED_AS)[number];

/** Input of Finalize. */
export const finalizeInputSchema = z.looseObject({
  jobId,
  finalState: z.optional(z.enum(['SUCCEEDED', 'FAILED', 'CANCELLED', 'REJECTED'])),
  reason: z.optional(z.string()),
  failedAs: z.optional(z.enum(FAILED_AS)),
});

/** Raised when a step's input does not match its schema (a wiring bug, not user input). */
export class InvalidStepInput extends Error {
  override name = 'InvalidStepInput';
}

/** Parses a step input or throws InvalidStepInput naming the fields. */
export function parseStep<T extends z.ZodMiniType>(schema: T, step: string, input: unknown): z.output<T> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  throw new InvalidStepInput(`${step} received an invalid input: ${describeIssues(result.error.issues)}`);
}
