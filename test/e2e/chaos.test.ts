/**
 * Chaos: five short jobs at once under random spot interruptions at a high, seeded rate. Every job must succeed at
 * its requested step count, and no cost may be lost or counted twice: each job's ledger entry equals its attempts'
 * costs, attempts are unique, redelivered events share one eventId, and the team's spend is the sum over the jobs.
 */
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDocumentClient } from '../../lambdas/shared/dynamo';
import { budgetKeys } from '../../lambdas/shared/table-design';
import { EXIT_CODES } from '../../lib/cli/exit-codes';
import { parseConfig } from '../../lib/config';
import { type LocalMode, startLocalMode } from '../../lib/local/local-mode';
import { LOCAL_NAMES } from '../../lib/local/names';
import { seededRandom } from '../../lib/seeded-random';
import { extractMetrics } from '../support/emf';
import {
  cents,
  E2E_CONFIG,
  expectedAttemptCostUsd,
  HELLO_CPU,
  json,
  ON_DEMAND_USD_PER_HOUR,
  SPOT_USD_PER_HOUR,
  tempDir,
  trainyard,
  watchToEnd,
} from './support';

const JOBS = 5;
const STEPS = [400, 500, 600, 700, 800];

type Attempt = {
  attempt: number;
  capacity: 'spot' | 'on-demand';
  startedAt: number;
  stoppedAt: number;
  usdPerHour: number;
  costUsd: number;
  outcome?: { kind: string };
};

describe('chaos: random spot interruptions at a high rate', () => {
  const dir = tempDir('chaos');
  let mode: LocalMode;

  beforeAll(async () => {
    mode = await startLocalMode({
      dir,
      config: parseConfig({ ...E2E_CONFIG, teams: [{ id: 'e2e', monthlyBudgetUsd: 5 }] }),
      // One interruption every ~3 s of spot run time on average: most attempts are interrupted; after two reclaims a
      // job falls back to on-demand (spotPolicy.reclaimsBeforeOnDemand), where none come, so every job can finish.
      spotInterruptionsPerHour: 1200,
      random: seededRandom(20261121),
      retryIntervalMs: 0,
      backoffWaitMs: 0,
      syncIntervalSeconds: 2,
    });
  });

  afterAll(async () => {
    await mode?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('finishes five concurrent jobs at their step counts with every cent accounted once', async () => {
    // The jobs alternate between the two kinds of spot: Fargate Spot's SIGTERM (cpu-test) and EC2's IMDS notice,
    // which the interruption handler also acts on (gpu-test).
    const submitted = await Promise.all(
      STEPS.map(async (steps, index) => {
        const tier = index % 2 === 0 ? 'cpu-test' : 'gpu-test';
        const run = await trainyard(
          [
            'submit',
            HELLO_CPU,
            '--tier',
            tier,
            '--yes',
            '--json',
            '--',
            'python',
            'train.py',
            `--max_iters=${steps}`,
            '--step_delay=0.01',
            '--checkpoint_interval=50',
          ],
          dir,
        );
        expect(run.code, run.stderr).toBe(EXIT_CODES.ok);
        return { jobId: String((json(run).job as { jobId: string }).jobId), steps, tier };
      }),
    );
    expect(new Set(submitted.map((s) => s.jobId)).size).toBe(JOBS);

    await Promise.all(submitted.map(({ jobId }) => watchToEnd(jobId, dir, EXIT_CODES.ok, mode.runner)));

    const doc = createDocumentClient({ endpoint: mode.dynamoEndpoint, credentials: mode.engineCredentials.dynamo });
    let teamCents = 0;
    let interruptions = 0;
    const reclaimedByTier: Record<string, number> = {};
    for (const { jobId, steps, tier } of submitted) {
      const status = json(await trainyard(['status', jobId, '--json'], dir)) as {
        job: { state: string; progress: { step: number } };
        attempts: Attempt[];
      };
      expect(status.job.state).toBe('SUCCEEDED');
      expect(status.job.progress.step).toBe(steps);

      // Attempts are numbered 1..n with no duplicate, all ended, every one but the last interrupted.
      expect(status.attempts.map((a) => a.attempt)).toEqual(status.attempts.map((_, i) => i + 1));
      expect(status.attempts.at(-1)?.outcome?.kind).toBe('succeeded');
      for (const attempt of status.attempts.slice(0, -1)) expect(attempt.outcome?.kind).toBe('reclaimed');
      interruptions += status.attempts.length - 1;
      reclaimedByTier[tier] = (reclaimedByTier[tier] ?? 0) + status.attempts.length - 1;

      let jobCents = 0;
      for (const attempt of status.attempts) {
        const price = attempt.capacity === 'spot' ? SPOT_USD_PER_HOUR : ON_DEMAND_USD_PER_HOUR;
        expect(attempt.usdPerHour).toBe(price);
        expect(attempt.costUsd).toBe(expectedAttemptCostUsd(attempt.startedAt, attempt.stoppedAt, price));
        jobCents += cents(attempt.costUsd);
      }

      // The ledger's own record of the job: settled at exactly the attempts' sum.
      const { Item } = await doc.get({
        TableName: LOCAL_NAMES.budgetsTable,
        Key: budgetKeys.job(jobId),
        ConsistentRead: true,
      });
      expect(Item?.settleActualMicros).toBe(jobCents * 10_000);
      teamCents += jobCents;
    }
    // The seed and rate must really have exercised interruptions of both kinds (else this test proves nothing).
    expect(interruptions).toBeGreaterThanOrEqual(JOBS);
    expect(reclaimedByTier['cpu-test']).toBeGreaterThan(0);
    expect(reclaimedByTier['gpu-test']).toBeGreaterThan(0);
    // Each reclaim counted once for its tier; EC2 warnings only on the EC2 tier.
    const metrics = extractMetrics(readFileSync(join(dir, 'metrics.jsonl'), 'utf8').split('\n'));
    const reclaimsCounted: Record<string, number> = {};
    for (const m of metrics.filter((m) => m.metric === 'SpotReclaims'))
      reclaimsCounted[m.dimensions.Tier as string] = (reclaimsCounted[m.dimensions.Tier as string] ?? 0) + m.value;
    expect(reclaimsCounted).toEqual(reclaimedByTier);
    const warned = metrics.filter((m) => m.metric === 'SpotInterruptions');
    expect(warned.length).toBeGreaterThan(0);
    expect(new Set(warned.map((m) => m.dimensions.Tier))).toEqual(new Set(['gpu-test']));

    // Team spend is the sum over the jobs, and nothing is left reserved.
    const budgets = json(await trainyard(['budgets', '--json'], dir)) as {
      budgets: Array<{ scope: string; spentUsd: number; reservedUsd: number }>;
    };
    const team = budgets.budgets.find((b) => b.scope === 'team:e2e');
    expect(team?.reservedUsd).toBe(0);
    expect(cents(team?.spentUsd ?? -1)).toBe(teamCents);

    // Events: an event about one thing (e.g. attempt 1's start, told by both batch-events and AttemptOutcome)
    // carries one eventId, so consumers keep the first; deduplicated, each job started once per
    // attempt and succeeded once.
    const lines = readFileSync(join(dir, 'events.jsonl'), 'utf8').trim().split('\n');
    const byId = new Map<string, { type: string; detail: Record<string, unknown> }>();
    for (const line of lines) {
      const event = JSON.parse(line) as { 'detail-type': string; detail: Record<string, unknown> };
      const id = String(event.detail.eventId);
      const first = byId.get(id);
      if (first) {
        expect({ type: event['detail-type'], jobId: event.detail.jobId, attempt: event.detail.attempt }).toEqual({
          type: first.type,
          jobId: first.detail.jobId,
          attempt: first.detail.attempt,
        });
      } else byId.set(id, { type: event['detail-type'], detail: event.detail });
    }
    const unique = [...byId.values()];
    for (const { jobId } of submitted) {
      const status = json(await trainyard(['status', jobId, '--json'], dir)) as { attempts: Attempt[] };
      const started = unique.filter((e) => e.type === 'Job Started' && e.detail.jobId === jobId);
      expect(started.map((e) => e.detail.attempt).sort()).toEqual(status.attempts.map((a) => a.attempt));
      expect(unique.filter((e) => e.type === 'Job Succeeded' && e.detail.jobId === jobId)).toHaveLength(1);
    }
  });
});
