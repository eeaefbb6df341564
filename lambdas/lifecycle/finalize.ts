/**
 * Finalize: the job is over. First every attempt whose end is not recorded is ended: Finalize also runs when
 * AttemptOutcome failed (a Batch job that would not stop, TerminateJob throttled through its retries), and nothing
 * else would stop that training. Each is looked up in Batch, recorded if Batch has ended it, else sent TerminateJob,
 * and Finalize throws AttemptsStillRunning, which the state machine retries (ATTEMPT_STOP_RETRY) until Batch ends
 * them: the reservation stays held while the job can still spend, and the settlement counts what they cost.
 * Then: settle the budget ledger to the sum of the metered attempt costs (or release an unused reservation), set the
 * final state, write the job summary (JSON) and report (HTML, with the harness's metric samples) to the workspace and
 * announce it. Replay-safe: attempt ends are record-once, TerminateJob of a job already stopping changes nothing,
 * settle and release return their first result, the state change accepts a job already in its final state, summary
 * and report are rewritten whole, events carry deterministic ids.
 *
 * The costs are read again once the ledger is settled and the state is final: an orphaned Batch job's cost that
 * batch-events recorded meanwhile is charged to the ledger (`chargeRecorded`) and counted in the job's cost. batch-events
 * charges what it records after that read itself, as it finds the ledger settled then, so no cost is left out. The
 * files are written with lambdas/shared/job-files.ts, which writes them again when an orphan's cost is recorded while
 * they are written; batch-events rewrites them for one recorded later, so they always say what the job was charged.
 */

import { UnknownBudgetJob } from '../domain/budgets';
import { isTerminal, type JobState, LIVE_STATES, TRANSITIONS } from '../domain/job';
import { recordedCost } from '../domain/watch';
import { publishCrossings } from '../shared/budget-alerts';
import type { ControlPlane } from '../shared/control-plane';
import { writeJobFiles } from '../shared/job-files';
import { AttemptsStillRunning, endOpenAttempts, endUnrecorded, endWithoutOutcome, jobEvent } from './common';
import { finalizeInputSchema, parseStep } from './steps';

/** Finalize's output (the execution's output). */
export interface FinalizeOutput {
  jobId: string;
  state: JobState;
  costUsd: number;
  summaryUri: string;
  reportUri: string;
}

/** Creates the Finalize step. */
export function createFinalizeHandler(
  plane: Pick<
    ControlPlane,
    'config' | 'jobs' | 'ledger' | 'workspace' | 'events' | 'batch' | 'clock' | 'metrics' | 'fleet'
  >,
) {
  return async (input: unknown): Promise<FinalizeOutput> => {
    const parsed = parseStep(finalizeInputSchema, 'Finalize', input);
    const { jobId } = parsed;
    let job = await plane.jobs.requireJob(jobId);
    // Nothing is settled while an attempt may still run: its reservation would be freed for money it goes on spending.
    let firstRead = await plane.jobs.listAttempts(jobId);
    if (firstRead.some(endUnrecorded)) {
      const running = await endOpenAttempts(plane, job, new Set());
      if (running.length > 0) {
        throw new AttemptsStillRunning(
          `job ${jobId}: attempts whose end is not recorded: ${running.join(', ')}; Finalize runs again once Batch reports them ended (a running one was sent TerminateJob)`,
        );
      }
      firstRead = await plane.jobs.listAttempts(jobId); // with the ends just recorded
    }
    const now = plane.clock();
    const firstCostUsd = recordedCost(firstRead);
    // No final state given: a step kept failing (StepFailed), and the records say how the job ended.
    const unsaid =
      parsed.finalState === undefined && !isTerminal(job.state)
        ? endWithoutOutcome(job, firstRead.at(-1)?.status, parsed.reason ?? 'a lifecycle step kept failing')
        : undefined;
    const finalState: JobState =
      job.state === 'REJECTED'
        ? 'REJECTED'
        : isTerminal(job.state)
          ? job.state
          : (parsed.finalState ?? unsaid?.finalState ?? 'FAILED');
    const reason = unsaid?.reason ?? parsed.reason ?? job.reason ?? finalState.toLowerCase();

    // What the ledger charges the job once it is settled (a release charges what was accrued, at most).
    let settledUsd = 0;
    // A job that ran is settled even at $0.00: settling replaces what budget-watch accrued with the recorded cost, where
    // a release would keep the accruals as spent.
    if (finalState === 'REJECTED') {
      await plane.ledger.release(jobId);
    } else {
      try {
        // The final cost can cross a threshold the running cost had not; a replay reports the same crossings.
        const settled = await plane.ledger.settle(jobId, firstCostUsd);
        settledUsd = settled.actualUsd;
        await publishCrossings(plane, settled.crossings, now.toISOString());
      } catch (error) {
        if (!(error instanceof UnknownBudgetJob)) throw error;
        await plane.ledger.release(jobId);
      }
    }
    if (!isTerminal(job.state)) {
      const from = LIVE_STATES.filter((state) => TRANSITIONS[state].includes(finalState));
      job = await plane.jobs.transition(jobId, from, finalState, { costSoFarUsd: firstCostUsd, reason });
      await plane.jobs.patchJob(jobId, {}, ['pauseToken']);
    }
    // Read again after the settlement and the final state (see the module comment).
    const ended = await plane.jobs.listAttempts(jobId);
    const recordedUsd = recordedCost(ended);
    if (recordedUsd > settledUsd) {
      // Recorded after the figure the ledger was settled to (by this call, or by a first run of it that a replay
      // finishes: the first settlement's amount stands). Monotonic: what batch-events charged already is not again.
      const charged = await plane.ledger.chargeRecorded(jobId, recordedUsd);
      await publishCrossings(plane, charged.crossings, now.toISOString());
    }
    // The files and the job's cost, from these attempts or from any recorded while they are written (job-files.ts).
    const written = await writeJobFiles(plane, job, ended, now.toISOString());
    job = written.job;
    const { attempts, costUsd, reportUri, summaryUri } = written;

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
          { tier: job.tier, attempts: Math.max(1, attempts.length), costUsd, runtimeSeconds, reportUri },
          at,
        ),
      ]);
    } else if (finalState === 'CANCELLED') {
      await plane.events.publish([jobEvent('Job Cancelled', job, { attempts: attempts.length, costUsd, reason }, at)]);
    } else {
      const last = [...attempts].reverse().find((a) => a.outcome)?.outcome;
      // The newest attempt's failure when it failed; else why the lifecycle failed the job between attempts (its
      // deadline passed or its maximum runtime was used up after a reclaim or a budget pause: `failedAs`); else the
      // platform's own fault.
      const outcome =
        finalState === 'REJECTED'
          ? 'rejected'
          : last?.kind === 'app-error' || last?.kind === 'infra-error' || last?.kind === 'timed-out'
            ? last.kind
            : last?.kind === 'resume-failed'
              ? 'app-error' // the training command failed each time; the reason says it was right after a restore
              : (parsed.failedAs ?? 'internal');
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
    return { jobId, state: finalState, costUsd, summaryUri, reportUri };
  };
}
