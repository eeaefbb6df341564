/**
 * Finalize: the job is over. Settle the budget ledger to the sum of its metered attempt costs (or release an unused
 * reservation), set the final state, write the job summary (JSON) and report (HTML, with the harness's metric samples)
 * to the workspace and announce it. Replay-safe: settle and release return their first result, the state change
 * accepts a job already in its final state, summary and report are rewritten whole, events carry deterministic ids.
 *
 * The costs are read again once the ledger is settled and the state is final: an orphaned Batch job's cost that
 * batch-events recorded meanwhile is charged to the ledger (`chargeLate`) and counted in the job's cost. batch-events
 * charges what it records after that read itself, as it finds the ledger settled then, so no cost is left out.
 */
import { UnknownBudgetJob } from '../domain/budgets';
import { isTerminal, type JobState, TRANSITIONS } from '../domain/job';
import { renderJobReport } from '../domain/job-report';
import { recordedCost } from '../domain/watch';
import { jobKeysFor, s3Uri } from '../domain/workspace-layout';
import { publishCrossings } from '../shared/budget-alerts';
import type { ControlPlane } from '../shared/control-plane';
import { ObjectTooLarge, type Workspace } from '../shared/workspace';
import { jobEvent } from './common';
import { finalizeInputSchema, parseStep } from './steps';

const LIVE_STATES: JobState[] = ['SUBMITTED', 'ANALYZING', 'WAITING', 'RUNNING', 'PAUSED_BUDGET'];

/**
 * The largest metrics.jsonl the report reads: about 440,000 samples of the harness's usual 150 bytes. The object is
 * held whole (twice while the SDK assembles it) and its series take about as much again, in a 512 MiB function; a
 * larger log leaves the sample plots out of the report, saying why, rather than run out of memory on every retry.
 */
export const MAX_REPORT_METRICS_BYTES = 64 * 1024 * 1024;

/** Finalize's output (the execution's output). */
export interface FinalizeOutput {
  jobId: string;
  state: JobState;
  costUsd: number;
  summaryUri: string;
  reportUri: string;
}

/** The harness's metrics log for the report: its bytes, nothing when there is none, or why it is left out. */
async function metricsForReport(
  workspace: Pick<Workspace, 'getAtMost'>,
  key: string,
): Promise<{ metricsLog?: Uint8Array; metricsOmitted?: string }> {
  try {
    const log = await workspace.getAtMost(key, MAX_REPORT_METRICS_BYTES);
    return log === undefined ? {} : { metricsLog: log };
  } catch (error) {
    if (!(error instanceof ObjectTooLarge)) throw error;
    const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
    return {
      metricsOmitted: `it holds ${error.bytes} bytes (${mib(error.bytes)} MiB), more than the ${mib(error.limitBytes)} MiB a report reads`,
    };
  }
}

/** Creates the Finalize step. */
export function createFinalizeHandler(
  plane: Pick<ControlPlane, 'config' | 'jobs' | 'ledger' | 'workspace' | 'events' | 'clock'>,
) {
  return async (input: unknown): Promise<FinalizeOutput> => {
    const parsed = parseStep(finalizeInputSchema, 'Finalize', input);
    const { jobId } = parsed;
    let job = await plane.jobs.requireJob(jobId);
    const now = plane.clock();
    const firstRead = await plane.jobs.listAttempts(jobId);
    const firstCostUsd = recordedCost(firstRead);
    const finalState: JobState =
      job.state === 'REJECTED'
        ? 'REJECTED'
        : isTerminal(job.state)
          ? job.state
          : (parsed.finalState ?? (job.cancelRequested ? 'CANCELLED' : 'FAILED'));
    const reason = parsed.reason ?? job.reason ?? finalState.toLowerCase();

    // What the ledger charges the job once it is settled (a release charges what was accrued, at most).
    let settledUsd = 0;
    if (finalState === 'REJECTED' || firstCostUsd === 0) {
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
    const attempts = await plane.jobs.listAttempts(jobId);
    const costUsd = recordedCost(attempts);
    if (costUsd > settledUsd) {
      // Recorded after the figure the ledger was settled to (by this call, or by a first run of it that a replay
      // finishes: the first settlement's amount stands). Monotonic: what batch-events charged already is not again.
      const charged = await plane.ledger.chargeLate(jobId, costUsd);
      await publishCrossings(plane, charged.crossings, now.toISOString());
    }
    if (costUsd !== job.costSoFarUsd) job = await plane.jobs.patchJob(jobId, { costSoFarUsd: costUsd });

    const keys = jobKeysFor(job.team, jobId);
    const decisions = await plane.jobs.listDecisions(jobId);
    const finishedAt = now.toISOString();
    const summary = { job: { ...job, pauseToken: undefined }, attempts, decisions, costUsd, finishedAt };
    await plane.workspace.put(keys.summary, JSON.stringify(summary, null, 2), 'application/json');
    const summaryUri = s3Uri(plane.workspace.bucket, keys.summary);
    const metrics = await metricsForReport(plane.workspace, keys.metricsLog);
    const report = renderJobReport({ job, attempts, decisions, costUsd, finishedAt, ...metrics });
    await plane.workspace.put(keys.report, report, 'text/html; charset=utf-8');
    const reportUri = s3Uri(plane.workspace.bucket, keys.report);

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
    return { jobId, state: finalState, costUsd, summaryUri, reportUri };
  };
}
