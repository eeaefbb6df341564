/**
 * Every place one finished job's cost appears, compared: attempt records (recomputed here from their times, per second
 * with the 60 s minimum, not by the metering code), job.costSoFarUsd, each budget scope's spend and reservation,
 * showback, summary.json and the end event.
 */
import { expect } from 'vitest';
import type { AttemptRecord } from '../../lambdas/domain/job';
import { jobKeysFor } from '../../lambdas/domain/workspace-layout';
import type { LifecycleBench } from './bench';

/** Micro-dollars of one billed run recomputed from its times (per second, ceil, 60 s minimum, half up). */
export function micros(run: { startedAt?: number; stoppedAt?: number; usdPerHour?: number; nodes?: number }): number {
  if (run.startedAt === undefined || run.stoppedAt === undefined) return 0;
  const seconds = Math.max(60, Math.ceil((run.stoppedAt - run.startedAt) / 1000));
  const perHour = Math.round((run.usdPerHour ?? 0) * 1_000_000);
  return Math.floor((2 * seconds * perHour * (run.nodes ?? 1) + 3600) / 7200);
}

export function attemptMicros(a: AttemptRecord): number {
  const own = micros(a);
  const orphans = Object.values(a.orphans ?? {}).reduce((s, o) => s + micros({ ...o, nodes: a.nodes }), 0);
  return own + orphans;
}

export async function figures(b: LifecycleBench, jobId: string) {
  const job = await b.plane.jobs.requireJob(jobId);
  const attempts = await b.plane.jobs.listAttempts(jobId);
  const keys = jobKeysFor(job.team, jobId);
  let summary: Record<string, unknown> | undefined;
  try {
    const body = await b.plane.workspace.get(keys.summary);
    summary = body ? JSON.parse(Buffer.from(body as Uint8Array).toString('utf8')) : undefined;
  } catch {
    summary = undefined;
  }
  const budgets = (await b.call('GET', '/budgets')).body;
  const showback = (await b.call('GET', '/reports/showback')).body as {
    jobs: Array<{ jobId: string; costUsd: number }>;
  };
  const ended = b.published
    .filter((e) => ['Job Succeeded', 'Job Failed', 'Job Cancelled'].includes(e.DetailType))
    .map((e) => JSON.parse(e.Detail) as Record<string, unknown>)
    .filter((d) => d.jobId === jobId);
  return { job, attempts, summary, budgets, showback, ended };
}

/** Asserts all figures of one finished job agree; returns the job's cents. */
export async function expectConsistent(b: LifecycleBench, jobId: string, opts: { team?: string } = {}) {
  const f = await figures(b, jobId);
  const recomputed = f.attempts.reduce((s, a) => s + attemptMicros(a), 0);
  const recorded = f.attempts.reduce(
    (s, a) =>
      s +
      Math.round((a.costUsd ?? 0) * 1e6) +
      Object.values(a.orphans ?? {}).reduce((t, o) => t + Math.round(o.costUsd * 1e6), 0),
    0,
  );
  const cents = Math.floor((recorded + 5000) / 10000);
  const detail = JSON.stringify({ attempts: f.attempts, job: f.job.costSoFarUsd, budgets: f.budgets }, null, 1);
  expect(recorded, `recorded attempt micros vs recomputed from times\n${detail}`).toBe(recomputed);
  expect(Math.round(f.job.costSoFarUsd * 100), 'job.costSoFarUsd').toBe(cents);
  const scopes = (f.budgets as { budgets: Array<{ scope: string; spentUsd: number; reservedUsd: number }> }).budgets;
  for (const s of scopes) {
    expect(Math.round(s.reservedUsd * 100), `${s.scope} reserved after the end\n${detail}`).toBe(0);
    expect(Math.round(s.spentUsd * 100), `${s.scope} spent\n${detail}`).toBe(cents);
  }
  const sb = f.showback.jobs.find((j) => j.jobId === jobId);
  expect(Math.round((sb?.costUsd ?? 0) * 1e6), 'showback job cost (micro)').toBe(recorded);
  expect(f.summary, 'summary.json written').toBeDefined();
  if (f.summary) {
    expect(
      Math.round(Number(f.summary.costUsd) * 100),
      `summary.json costUsd ${JSON.stringify(f.summary).slice(0, 400)}`,
    ).toBe(cents);
  }
  expect(f.ended.length, 'one end event').toBe(1);
  const endCost = f.ended[0]?.costUsd;
  if (endCost !== undefined) expect(Math.round(Number(endCost) * 100), 'end event costUsd').toBe(cents);
  return { ...f, cents, recorded };
}
