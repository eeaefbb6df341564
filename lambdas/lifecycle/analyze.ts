/**
 * Analyze: read the job's code bundle, decide its tier and estimate its cost (the same assessment the API showed at
 * submit). A workload nothing can run is REJECTED with the reason. Replay-safe: same bundle, same answer.
 */

import { InvalidRequirement, UnknownTier, WorkloadRefused } from '../domain/analysis';
import { assessWorkload, estimateSummary, priceAssessment, tiersForTeam } from '../domain/assessment';
import { isTerminal } from '../domain/job';
import type { ControlPlane } from '../shared/control-plane';
import { InvalidBundle, sha256Hex, textFilesOf, unpackTarGz } from '../shared/tarball';
import { ObjectTooLarge } from '../shared/workspace';
import { AnalysisError } from './errors';
import { analyzeInputSchema, parseStep } from './steps';

/** Analyze's output. */
export type AnalyzeOutput =
  | { jobId: string; next: 'cost-gate'; reservationUsd: number }
  | { jobId: string; next: 'finalize'; finalState: 'REJECTED' | 'CANCELLED'; reason: string };

/** Creates the Analyze step. */
export function createAnalyzeHandler(
  plane: Pick<ControlPlane, 'config' | 'jobs' | 'workspace' | 'spotQuotes' | 'clock'>,
) {
  return async (input: unknown): Promise<AnalyzeOutput> => {
    const { jobId } = parseStep(analyzeInputSchema, 'Analyze', input);
    const job = await plane.jobs.requireJob(jobId);
    if (isTerminal(job.state)) {
      return {
        jobId,
        next: 'finalize',
        finalState: job.state === 'CANCELLED' ? 'CANCELLED' : 'REJECTED',
        reason: job.reason ?? job.state,
      };
    }
    if (job.cancelRequested)
      return { jobId, next: 'finalize', finalState: 'CANCELLED', reason: 'cancelled before it ran' };
    await plane.jobs.transition(jobId, ['SUBMITTED', 'ANALYZING'], 'ANALYZING');

    const reject = async (reason: string): Promise<AnalyzeOutput> => {
      await plane.jobs.transition(jobId, ['ANALYZING'], 'REJECTED', { reason });
      return { jobId, next: 'finalize', finalState: 'REJECTED', reason };
    };
    // The bundle lies in the team's folder, which the team's jobs can write: read no more than was submitted, and
    // only what was submitted.
    let archive: Buffer | undefined;
    try {
      archive = await plane.workspace.getAtMost(job.bundle.key, job.bundle.bytes);
    } catch (error) {
      if (!(error instanceof ObjectTooLarge)) throw error;
      return reject(bundleReplaced(job.bundle.key, `${error.bytes} bytes, not the ${job.bundle.bytes} submitted`));
    }
    if (!archive)
      throw new AnalysisError(`code bundle ${job.bundle.key} of job ${jobId} is missing from the workspace`);
    const sha256 = sha256Hex(archive);
    if (sha256 !== job.bundle.sha256) {
      return reject(bundleReplaced(job.bundle.key, `sha256 ${sha256}, not the ${job.bundle.sha256} submitted`));
    }
    let files: Record<string, string>;
    try {
      files = textFilesOf(unpackTarGz(archive));
    } catch (error) {
      if (error instanceof InvalidBundle) return reject(error.message);
      throw error;
    }
    try {
      const assessment = assessWorkload(
        { files, command: job.command },
        tiersForTeam(plane.config, job.team),
        job.requirements,
      );
      const quotes =
        assessment.tier.kind === 'gpu' && assessment.tier.spotAllowed
          ? await plane.spotQuotes.quotesFor([...assessment.tier.instanceTypes])
          : undefined;
      const priced = priceAssessment(assessment, quotes, job.requirements);
      const maxIters = assessment.analysis.hyperparameters.max_iters?.value;
      await plane.jobs.patchJob(jobId, {
        tier: priced.tier.id,
        estimate: estimateSummary(priced),
        // A whole number of steps: a config file may compute max_iters (`5000 / 3`), which the loop compares as is.
        ...(typeof maxIters === 'number' && maxIters > 0 && !job.progress
          ? { progress: { totalSteps: Math.ceil(maxIters), fraction: 0, updatedAt: plane.clock().toISOString() } }
          : {}),
      });
      return { jobId, next: 'cost-gate', reservationUsd: priced.estimate.reservationUsd };
    } catch (error) {
      if (error instanceof WorkloadRefused || error instanceof UnknownTier || error instanceof InvalidRequirement) {
        return reject(error.message);
      }
      throw error;
    }
  };
}

/** Why a job whose stored bundle is not the one submitted is rejected. */
function bundleReplaced(key: string, what: string): string {
  return `code bundle ${key} was replaced after the job was submitted (it holds ${what}); submit the job again`;
}
