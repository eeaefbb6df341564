/**
 * PausedForBudget (a waitForTaskToken Task): a running job was stopped because a budget scope reached its block
 * threshold. Record PAUSED_BUDGET with the task token; `resume` (API, or budget-watch once the budget allows it)
 * or `cancel` sends task success to continue. A cancel that arrived before the token was stored is honoured here.
 * The paused job's reservation goes back to its budgets (ledger `returnHeld`): it spends nothing while paused, so it
 * holds no money other jobs could use, and a resume reserves again what it is forecast to cost to finish. First its
 * recorded cost is accrued: the run since budget-watch last metered it (up to a tick, more for jobs a capped tick left
 * unmetered) was paid from that reservation, and giving it all back would show spent money as available.
 */
import { jobScopes, periodOf, UnknownBudgetJob } from '../domain/budgets';
import { recordedCost } from '../domain/watch';
import { publishCrossings } from '../shared/budget-alerts';
import type { ControlPlane } from '../shared/control-plane';
import { jobEvent } from './common';
import { parseStep, pauseInputSchema } from './steps';

/** Creates the pause step. */
export function createPauseHandler(
  plane: Pick<ControlPlane, 'config' | 'jobs' | 'ledger' | 'events' | 'lifecycle' | 'clock'>,
) {
  return async (input: unknown): Promise<{ jobId: string; paused: boolean }> => {
    const { jobId, taskToken } = parseStep(pauseInputSchema, 'PausedForBudget', input);
    const job = await plane.jobs.requireJob(jobId);
    const now = plane.clock();
    const period = periodOf(new Date(job.createdAt));
    let scope = jobScopes(job)[0] ?? `team:${job.team}`;
    for (const candidate of jobScopes(job)) {
      const usage = await plane.ledger.usage(candidate, period);
      if (usage?.blocked) {
        scope = candidate;
        break;
      }
    }
    const reason = `paused: budget scope ${scope} reached its block threshold; raise the budget and resume`;
    // Charged first (accrue is monotonic, so a retry changes nothing), then what the job still holds goes back, before
    // its token is stored (a resume raises it again, and must come after this).
    try {
      const { crossings } = await plane.ledger.accrue(jobId, recordedCost(await plane.jobs.listAttempts(jobId)));
      await publishCrossings(plane, crossings, now.toISOString());
    } catch (error) {
      if (!(error instanceof UnknownBudgetJob)) throw error;
    }
    await plane.ledger.returnHeld(jobId);
    // A paused job still holding a token, or paused for a pause it has not been resumed from, is this pause, its step
    // retried: budget-watch may have cleared the token of a first try that failed, which died with that try. One
    // PrepareAttempt took on after a resume (it counts `resumedPauses` and clears the spent token), or not paused at
    // all, starts a new pause.
    const samePause =
      job.state === 'PAUSED_BUDGET' && (job.pauseToken !== undefined || (job.pauses ?? 0) > (job.resumedPauses ?? 0));
    const pauses = samePause ? (job.pauses ?? 1) : (job.pauses ?? 0) + 1;
    const paused = await plane.jobs.transition(jobId, ['WAITING', 'RUNNING', 'PAUSED_BUDGET'], 'PAUSED_BUDGET', {
      pauseToken: taskToken,
      pauses,
      reason,
    });
    await plane.events.publish([
      jobEvent(
        'Job PausedForBudget',
        job,
        {
          attempt: Math.max(1, paused.counters.attempts),
          pause: paused.pauses ?? pauses,
          scope,
          costSoFarUsd: paused.costSoFarUsd,
          reason,
        },
        now,
      ),
    ]);
    if (paused.cancelRequested) await plane.lifecycle.sendTaskSuccess(taskToken, { action: 'cancel' });
    return { jobId, paused: true };
  };
}
