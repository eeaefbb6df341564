/**
 * Finalize: the job is over. Settle the budget ledger to the sum of its metered attempt costs (or release an unused
 * reservation), write the job summary to the workspace, set the final state and announce it. Replay-safe: settle and
 * release return their first result, the state change accepts a job already in its final state, events carry
 * deterministic ids.
 */
import { UnknownBudgetJob } from '../domain/budgets';
import { isTerminal, type JobState, TRANSITIONS } from '../domain/job';
import { recordedCost } from '../domain/watch';
import { jobKeysFor, s3Uri } from '../domain/workspace-layout';
import type { ControlPlane } from '../shared/control-plane';
import { jobEvent } from './common';
import { finalizeInputSchema, parseStep } from './steps';

const LIVE_STATES: JobState[] = ['SUBMITTED', 'ANALYZING', 'WAITING', 'RUNNING', 'PAUSED_BUDGET'];

/** Finalize's output (the execution's output). */
export interface FinalizeOutput {
  jobId: string;
  state: JobState;
  costUsd: number;
  summaryUri: string;
}

/** Creates the Finalize step. */
export function createFinalizeHandler(plane: Pick<ControlPlane, 'jobs' | 'ledger' | 'workspace' | 'events' | 'clock'>) {
  return async (input: unknown): Promise<FinalizeOutput> => {
    const parsed = parseStep(finalizeInputSchema, 'Finalize', input);
    const { jobId } = parsed;
    let job = await plane.jobs.requireJob(jobId);
    const now = plane.clock();
    const attempts = await plane.jobs.listAttempts(jobId);
    const costUsd = recordedCost(attempts);
    const finalState: JobState =
      job.state === 'REJECTED'
        ? 'REJECTED'
        : isTerminal(job.state)
          ? job.state
          : (parsed.finalState ?? (job.cancelRequested ? 'CANCELLED' : 'FAILED'));
    const reason = parsed.reason ?? job.reason ?? finalState.toLowerCase();

    if (finalState === 'REJECTED' || costUsd === 0) {
      await plane.ledger.release(jobId);
    } else {
      try {
        await plane.ledger.settle(jobId, costUsd);
      } catch (error) {
        if (!(error instanceof UnknownBudgetJob)) throw error;
        await plane.ledger.release(jobId);
      }
    }
    if (!isTerminal(job.state)) {
      const from = LIVE_STATES.filter((state) => TRANSITIONS[state].includes(finalState));
      job = await plane.jobs.transition(jobId, from, finalState, { costSoFarUsd: costUsd, reason });
      await plane.jobs.patchJob(jobId, {}, ['pauseToken']);
    }

    const keys = jobKeysFor(job.team, jobId);
    const summary = {
      job: { ...job, pauseToken: undefined },
      attempts,
      decisions: await plane.jobs.listDecisions(jobId),
      costUsd,
      finishedAt: now.toISOString(),
    };
    await plane.workspace.put(keys.summary, JSON.stringify(summary, null, 2), 'application/json');
    const summaryUri = s3Uri(plane.workspace.bucket, keys.summary);

    const runtimeSeconds = attempts.reduce(
      (sum, a) => sum + (a.startedAt && a.stoppedAt ? (a.stoppedAt - a.startedAt) / 1000 : 0),
      0,
    );
    const at = new Date(job.updatedAt ?? now.toISOString());
    if (finalState === 'SUCCEEDED') {
      await plane.events.publish([
        jobEvent(
          'Job Succeeded',
          job,
          { tier: job.tier, attempts: Math.max(1, attempts.length), costUsd, runtimeSeconds, reportUri: summaryUri },
          at,
        ),
      ]);
    } else if (finalState === 'CANCELLED') {
      await plane.events.publish([jobEvent('Job Cancelled', job, { attempts: attempts.length, costUsd, reason }, at)]);
    } else {
      const last = [...attempts].reverse().find((a) => a.outcome)?.outcome;
      const outcome =
        finalState === 'REJECTED'
          ? 'rejected'
          : last?.kind === 'app-error' || last?.kind === 'infra-error' || last?.kind === 'timed-out'
            ? last.kind
            : last?.kind === 'resume-failed'
              ? 'app-error' // the training command failed each time; the reason says it was right after a restore
              : 'internal';
      await plane.events.publish([
        jobEvent(
          'Job Failed',
          job,
          {
            tier: job.tier,
            attempts: attempts.length,
            costUsd,
            outcome,
            ...(last?.exitCode !== undefined ? { exitCode: last.exitCode } : {}),
            reason,
          },
          at,
        ),
      ]);
    }
    return { jobId, state: finalState, costUsd, summaryUri };
  };
}
