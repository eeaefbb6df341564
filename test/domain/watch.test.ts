// Table-driven tests of the event handlers' pure rules (domain/watch.ts). Expected money is worked out by hand:
// price × billed seconds ÷ 3600 (60 s minimum, started seconds billed whole), summed, rounded to the cent.
import { describe, expect, it } from 'vitest';
import type { AttemptRecord, DecisionRecord } from '../../lambdas/domain/job';
import { DEFAULT_PLACEMENT_CONFIG, decidePlacement } from '../../lambdas/domain/placement';
import { FLEET_SPOT_MODEL } from '../../lambdas/domain/spot-fleet-model';
import {
  attemptRefOf,
  attemptReportedAt,
  budgetPeriodOf,
  costToFinishUsd,
  hasDecision,
  jobCostSoFar,
  nextDecisionSeq,
  placementConfigFrom,
  placementStateFor,
  progressFromHarness,
  queuedSpotAttempt,
  recordedCost,
  runningAttempt,
  sameProgress,
  spotTroublesSinceLastMove,
} from '../../lambdas/domain/watch';
import { parseConfig } from '../../lib/config';

const JOB = '01JDA7Q6ZK3V8N2M4P5R6S7T8W';
const T0 = 1_795_183_200_000;
const tier = (() => {
  const found = parseConfig({}, 'test').tiers.find((t) => t.id === 'gpu-small');
  if (!found) throw new Error('gpu-small missing');
  return found; // on-demand 0.526, spot 0.19
})();

const attempt = (n: number, fields: Partial<AttemptRecord> = {}): AttemptRecord => ({
  jobId: JOB,
  attempt: n,
  capacity: 'spot',
  queue: 'q',
  nodes: 1,
  status: 'RUNNING',
  ...fields,
});

describe('attemptRefOf', () => {
  it.each([
    {
      what: 'tags name job, attempt and team',
      job: {
        jobName: 'anything',
        tags: { 'trainyard:job-id': JOB, 'trainyard:attempt': '3', 'trainyard:team': 'nlp' },
      },
      ref: { jobId: JOB, attempt: 3, team: 'nlp' },
    },
    { what: 'the name <jobId>-a<n> without tags', job: { jobName: `${JOB}-a12` }, ref: { jobId: JOB, attempt: 12 } },
    {
      what: 'tags win over the name',
      job: { jobName: `${JOB}-a1`, tags: { 'trainyard:job-id': 'other', 'trainyard:attempt': '2' } },
      ref: { jobId: 'other', attempt: 2 },
    },
    { what: 'AWS’s example job', job: { jobName: 'event-test' }, ref: undefined },
    { what: 'a name with attempt 0', job: { jobName: `${JOB}-a0` }, ref: undefined },
    { what: 'a name without the a', job: { jobName: `${JOB}-1` }, ref: undefined },
    {
      what: 'a non-numeric attempt tag',
      job: { jobName: 'x', tags: { 'trainyard:job-id': JOB, 'trainyard:attempt': 'one' } },
      ref: undefined,
    },
    {
      what: 'a job-id tag that is not a job id',
      job: { jobName: 'x', tags: { 'trainyard:job-id': 'a b', 'trainyard:attempt': '1' } },
      ref: undefined,
    },
  ])('$what', ({ job, ref }) => {
    expect(attemptRefOf(job as { jobName: string; tags?: Record<string, string> })).toEqual(ref);
  });
});

describe('jobCostSoFar and recordedCost', () => {
  it.each([
    { what: 'nothing started', attempts: [attempt(1)], now: T0 + 3_600_000, usd: 0 },
    // 0.19 × 3600 s ÷ 3600 = 0.19
    {
      what: 'one hour of spot at its recorded price',
      attempts: [attempt(1, { startedAt: T0, usdPerHour: 0.19 })],
      now: T0 + 3_600_000,
      usd: 0.19,
    },
    // No recorded price: the tier's spot price 0.19; 10 s bills the 60 s minimum: 0.19 × 60 ÷ 3600 = 0.0031667 → 0.00
    {
      what: 'the 60 s minimum at the tier price',
      attempts: [attempt(1, { startedAt: T0 })],
      now: T0 + 10_000,
      usd: 0,
    },
    // 0.42 recorded + on-demand 0.526 × 1800 ÷ 3600 = 0.263 → 0.683 → 0.68
    {
      what: 'ended attempts’ recorded costs plus the running one',
      attempts: [
        attempt(1, { startedAt: T0, stoppedAt: T0 + 1000, costUsd: 0.42, status: 'FAILED' }),
        attempt(2, { capacity: 'on-demand', startedAt: T0 + 60_000 }),
      ],
      now: T0 + 60_000 + 1_800_000,
      usd: 0.68,
    },
    // Two nodes on-demand for 30 minutes: 0.526 × 1800 × 2 ÷ 3600 = 0.526
    {
      what: 'a multi-node attempt',
      attempts: [attempt(1, { capacity: 'on-demand', startedAt: T0, nodes: 2 })],
      now: T0 + 1_800_000,
      usd: 0.53,
    },
    {
      what: 'a clock behind the recorded start bills the minimum, not a negative span',
      attempts: [attempt(1, { startedAt: T0, usdPerHour: 3.6 })],
      now: T0 - 5000,
      usd: 0.06,
    },
  ])('$what', ({ attempts, now, usd }) => {
    expect(jobCostSoFar(attempts, tier, now)).toBe(usd);
  });

  it('counts the orphaned Batch jobs recorded on an attempt, in the recorded cost and the cost so far', () => {
    const orphans = {
      'b-1': { capacity: 'spot' as const, startedAt: T0, stoppedAt: T0 + 600_000, usdPerHour: 0.2, costUsd: 0.034 },
      'b-2': {
        capacity: 'on-demand' as const,
        startedAt: T0,
        stoppedAt: T0 + 60_000,
        usdPerHour: 3.06,
        costUsd: 0.051,
      },
    };
    // "Not run" ($0 of its own) with two orphans: 0.034 + 0.051 = 0.085 → 0.09.
    const notRun = attempt(1, { stoppedAt: T0 + 1000, costUsd: 0, status: 'FAILED', orphans });
    expect(recordedCost([notRun])).toBe(0.09);
    // Plus a running on-demand attempt: 0.526 × 1800 ÷ 3600 = 0.263; 0.085 + 0.263 = 0.348 → 0.35.
    const running = attempt(2, { capacity: 'on-demand', startedAt: T0 + 60_000 });
    expect(jobCostSoFar([notRun, running], tier, T0 + 60_000 + 1_800_000)).toBe(0.35);
  });

  it('sums recorded costs exactly (three half cents make two cents, not one)', () => {
    const attempts = [0.005, 0.005, 0.005].map((c, i) => attempt(i + 1, { costUsd: c }));
    expect(recordedCost(attempts)).toBe(0.02);
  });
});

describe('runningAttempt', () => {
  it('is the highest-numbered started, unstopped attempt', () => {
    const attempts = [attempt(1, { startedAt: T0, stoppedAt: T0 + 1 }), attempt(2, { startedAt: T0 + 2 }), attempt(3)];
    expect(runningAttempt(attempts)?.attempt).toBe(2);
    expect(runningAttempt([attempt(1)])).toBeUndefined();
  });
});

describe('progressFromHarness', () => {
  const doc = {
    job_id: JOB,
    attempt: 2,
    state: 'running',
    step: 300,
    total_steps: 1200,
    loss: 1.5,
    resumed_from_step: 250,
    exit_code: null,
    updated_at: '2026-11-20T14:29:40.123Z',
  };
  it.each([
    {
      what: 'a full document',
      raw: doc,
      progress: { step: 300, totalSteps: 1200, fraction: 0.25, loss: 1.5, updatedAt: '2026-11-20T14:29:40.123Z' },
    },
    {
      what: 'a null loss is left out',
      raw: { ...doc, loss: null },
      progress: { step: 300, totalSteps: 1200, fraction: 0.25, updatedAt: '2026-11-20T14:29:40.123Z' },
    },
    {
      what: 'a step past the total caps the fraction at 1',
      raw: { ...doc, step: 1300 },
      progress: { step: 1300, totalSteps: 1200, fraction: 1, loss: 1.5, updatedAt: '2026-11-20T14:29:40.123Z' },
    },
    {
      what: 'an offset time is normalised to UTC',
      raw: { ...doc, updated_at: '2026-11-20T15:29:40.123+01:00' },
      progress: { step: 300, totalSteps: 1200, fraction: 0.25, loss: 1.5, updatedAt: '2026-11-20T14:29:40.123Z' },
    },
    { what: 'no total steps', raw: { ...doc, total_steps: null }, progress: undefined },
    { what: 'no step yet', raw: { ...doc, step: null }, progress: undefined },
    { what: 'another job’s document', raw: { ...doc, job_id: 'someone-else' }, progress: undefined },
    { what: 'no document', raw: undefined, progress: undefined },
    { what: 'a malformed document', raw: { ...doc, step: 'three hundred' }, progress: undefined },
  ])('$what', ({ raw, progress }) => {
    expect(progressFromHarness(raw, JOB)).toEqual(progress);
  });

  it('compares progress field by field', () => {
    const p = { step: 1, totalSteps: 2, fraction: 0.5, updatedAt: '2026-11-20T14:29:40.123Z' };
    expect(sameProgress(p, { ...p })).toBe(true);
    expect(sameProgress(p, { ...p, loss: 1 })).toBe(false);
    expect(sameProgress(p, undefined)).toBe(false);
    expect(sameProgress(undefined, undefined)).toBe(true);
  });
});

describe('attemptReportedAt', () => {
  const doc = { job_id: JOB, attempt: 2, step: null, total_steps: null, updated_at: '2026-11-20T15:29:40.123+01:00' };
  it.each([
    // The harness's time, even before any step was reported (a report is a sign of life, not of progress).
    { what: 'the attempt’s own document, at its time', raw: doc, at: Date.UTC(2026, 10, 20, 14, 29, 40, 123) },
    { what: 'a later attempt’s document', raw: { ...doc, attempt: 3 }, at: undefined },
    { what: 'another job’s document', raw: { ...doc, job_id: 'someone-else' }, at: undefined },
    { what: 'no document', raw: undefined, at: undefined },
    { what: 'a document without a time', raw: { ...doc, updated_at: undefined }, at: undefined },
  ])('$what', ({ raw, at }) => {
    expect(attemptReportedAt(raw, JOB, 2)).toBe(at);
  });
});

describe('costToFinishUsd', () => {
  const estimate = { costUsd: 10, runtimeSeconds: 36_000, confidence: 'medium', basis: 'test' } as const;
  const at = (fraction: number) => ({ fraction, step: 0, updatedAt: '2026-11-20T12:00:00.000Z' });
  it.each([
    ['no progress reported: the whole estimate', undefined, 0, 10],
    ['on its estimate: the estimate for the work left', at(0.25), 2, 7.5],
    ['overran its estimate: its own rate for the work left', at(0.25), 4, 12],
    ['a third done for nothing spent: 6.666… rounded up', at(1 / 3), 0, 6.67],
    ['0.25 % done for $0.50 (start-up): its rate is not trusted yet, the estimate is', at(0.0025), 0.5, 9.98],
    ['10 % done for $5: its own rate from there', at(0.1), 5, 45],
    ['all done: nothing', at(1), 11, 0],
  ])('%s', (_, progress, costSoFarUsd, expected) => {
    expect(costToFinishUsd({ estimate, costSoFarUsd, ...(progress ? { progress } : {}) })).toBe(expected);
  });
});

describe('budgetPeriodOf', () => {
  it('is the UTC month of submission', () => {
    expect(budgetPeriodOf({ createdAt: '2026-11-30T23:59:59.000Z' })).toBe('2026-11');
    expect(budgetPeriodOf({ createdAt: '2026-12-01T00:00:00.000Z' })).toBe('2026-12');
  });
});

describe('placement input', () => {
  const estimate = { costUsd: 1, runtimeSeconds: 3600, confidence: 'high' as const, basis: 'b' };
  const job = {
    createdAt: new Date(T0).toISOString(),
    requirements: { deadlineSeconds: 7200 },
    estimate,
    progress: { fraction: 0.5, updatedAt: '2026-11-20T14:29:40.123Z' },
  };

  it('tells the policy the time, work, progress, capacity and spot troubles since the last move back to spot', () => {
    const attempts = [
      attempt(1, { stoppedAt: T0 + 1, startedAt: T0, outcome: { kind: 'reclaimed', reason: 'r', resumable: true } }),
      attempt(2, {
        capacity: 'on-demand',
        startedAt: T0 + 2,
        stoppedAt: T0 + 3,
        outcome: { kind: 'moved', reason: 'r', resumable: true },
      }),
      attempt(3, {
        startedAt: T0 + 4,
        stoppedAt: T0 + 5,
        outcome: { kind: 'capacity-starved', reason: 'r', resumable: true },
      }),
      attempt(4, { startedAt: T0 + 6 }),
    ];
    expect(placementStateFor(job, attempts, { spotAllowed: true }, T0 + 1_800_000)).toEqual({
      moment: 'periodic-check',
      nowSeconds: 1800,
      deadlineSeconds: 7200,
      workSeconds: 3600,
      progressSeconds: 1800,
      current: 'spot',
      spotAvailable: true,
      // Attempt 4 started at T0 + 6 ms: spot has been there for 1800 − 0.006 s.
      spotAvailableForSeconds: expect.closeTo(1799.994, 6),
      // Spot attempts 1, 3 and 4 ran 0.001 s, 0.001 s and 1800 − 0.006 s (4 is open until now); none was queued;
      // attempt 1 was reclaimed (the history counts since submission, unlike `reclaims`).
      spotHistory: { availableSeconds: expect.closeTo(1799.996, 6), unavailableSeconds: 0, reclaims: 1 },
      reclaims: 0,
      capacityCancellations: 1,
      spotAllowed: true,
    });
  });

  it('has nothing to say without an estimate or a running attempt', () => {
    const onDemand = [attempt(1, { capacity: 'on-demand', startedAt: T0 })];
    expect(placementStateFor({ ...job, estimate: undefined }, onDemand, { spotAllowed: true }, T0)).toBeUndefined();
    expect(placementStateFor(job, [attempt(1)], { spotAllowed: true }, T0)).toBeUndefined();
  });

  // On on-demand since T0 + 60 s; the check runs at T0 + 1800 s.
  const onDemand = [attempt(1, { capacity: 'on-demand', submittedAt: T0, startedAt: T0 + 60_000 })];
  const now = T0 + 1_800_000;
  it.each([
    { what: 'no fresh tier record', tierSpot: undefined },
    { what: 'the tier record', tierSpot: { available: true, forSeconds: 900, sinceChange: true } },
  ])('on on-demand, observes nothing of spot itself and hands on $what', ({ tierSpot }) => {
    const state = placementStateFor(job, onDemand, { spotAllowed: true }, now, tierSpot);
    expect(state?.current).toBe('on-demand');
    expect(state?.spotAvailable).toBeUndefined();
    expect(state?.spotAvailableForSeconds).toBeUndefined();
    expect(state?.tierSpot).toEqual(tierSpot);
    // An on-demand attempt observes nothing about spot.
    expect(state?.spotHistory).toEqual({ availableSeconds: 0, unavailableSeconds: 0, reclaims: 0 });
  });

  it('on spot, the running attempt is the job’s own observation; the tier record rides along for the policy', () => {
    const onSpot = [attempt(1, { startedAt: T0 + 60_000 })];
    const tierSpot = { available: false, forSeconds: 300, sinceChange: true };
    const state = placementStateFor(job, onSpot, { spotAllowed: true }, now, tierSpot);
    expect(state?.spotAvailable).toBe(true);
    // Spot has been there since the attempt started: 1800 − 60 s.
    expect(state?.spotAvailableForSeconds).toBe(1740);
    expect(state?.tierSpot).toEqual(tierSpot);
  });

  it('sees a spot attempt queued for less than a start takes as starting: it says nothing of spot', () => {
    // Queued 200 s ago (T0 + 1600 s), under the 360 s allowance; queued 1200 s ago, over it.
    const young = [attempt(1, { submittedAt: now - 200_000, startedAt: undefined, batchJobId: 'b-1' })];
    const state = placementStateFor(job, young, { spotAllowed: true }, now, undefined, 360);
    expect(state).toMatchObject({ current: 'none' });
    expect(state?.spotAvailable).toBeUndefined();
    expect(state?.spotUnavailableForSeconds).toBeUndefined();
    const old = [attempt(1, { submittedAt: now - 1_200_000, startedAt: undefined, batchJobId: 'b-1' })];
    expect(placementStateFor(job, old, { spotAllowed: true }, now, undefined, 360)).toMatchObject({
      current: 'none',
      spotAvailable: false,
      spotUnavailableForSeconds: 1200,
    });
  });

  it('sees a spot attempt starting while the tier record sees spot as on spot, available since it was queued', () => {
    const young = [attempt(1, { submittedAt: now - 200_000, startedAt: undefined, batchJobId: 'b-1' })];
    const seen = { available: true, forSeconds: 900, sinceChange: true };
    expect(placementStateFor(job, young, { spotAllowed: true }, now, seen, 360)).toMatchObject({
      current: 'spot',
      spotAvailable: true,
      spotAvailableForSeconds: 200,
    });
    // The record sees an outage: the young attempt says nothing, and the record speaks.
    const outage = { available: false, forSeconds: 900, sinceChange: true };
    const state = placementStateFor(job, young, { spotAllowed: true }, now, outage, 360);
    expect(state).toMatchObject({ current: 'none' });
    expect(state?.spotAvailable).toBeUndefined();
  });

  it('does not send a job moved to spot back to on-demand while its spot attempt is still starting', () => {
    // A deadline job on on-demand, spot seen for two hours. Slack = deadline − now − work left:
    // 27 000 − (27 000 − 3 600 − 1 500) − 3 600 = 1 500 s, within 1 380 (3d + check) … 1 680 s, the band in which a
    // start charged again at the next check (slack 1 200 − 360 < 2·360 + 300) undid the move.
    const deadlineJob = {
      createdAt: new Date(T0).toISOString(),
      requirements: { deadlineSeconds: 27_000 },
      estimate: { ...estimate, runtimeSeconds: 7200 },
      progress: { fraction: 0.5, updatedAt: '2026-11-20T14:29:40.123Z' },
    };
    const policy = placementConfigFrom(
      DEFAULT_PLACEMENT_CONFIG,
      { reclaimsBeforeOnDemand: 2, capacityWaitMinutes: 20 },
      tier,
    );
    const moveAt = T0 + (27_000 - 3_600 - 1_500) * 1000;
    const onDemandAttempt = attempt(1, {
      capacity: 'on-demand',
      submittedAt: T0,
      startedAt: T0 + 60_000,
      batchJobId: 'b-1',
    });
    const seen = (forSeconds: number) => ({ available: true, forSeconds, sinceChange: true });
    const first = placementStateFor(deadlineJob, [onDemandAttempt], tier, moveAt, seen(7200), 360);
    expect(first && decidePlacement(first, policy)).toMatchObject({ capacity: 'spot', move: true });

    // Five minutes on, the spot attempt queued at the move is still starting (300 s of its 360 s); no progress since.
    const later = moveAt + 300_000;
    const attempts = [
      { ...onDemandAttempt, stoppedAt: moveAt },
      attempt(2, { submittedAt: moveAt, startedAt: undefined, status: 'RUNNABLE', batchJobId: 'b-2' }),
    ];
    const second = placementStateFor(deadlineJob, attempts, tier, later, seen(7500), 360);
    expect(second && decidePlacement(second, policy)).toMatchObject({ capacity: 'spot', move: false });
  });

  it('sees a job waiting in the spot queue as holding nothing, with spot unavailable since it was queued', () => {
    const queued = [attempt(1, { submittedAt: T0 + 600_000, startedAt: undefined, batchJobId: 'b-1' })];
    expect(placementStateFor(job, queued, { spotAllowed: true }, now)).toMatchObject({
      current: 'none',
      spotAvailable: false,
      spotUnavailableForSeconds: 1200,
    });
    expect(queuedSpotAttempt(queued)?.attempt).toBe(1);
    // Not handed to Batch yet, or already stopped: nothing to check.
    expect(queuedSpotAttempt([attempt(1, { submittedAt: T0, startedAt: undefined, batchJobId: undefined })])).toBe(
      undefined,
    );
    expect(
      queuedSpotAttempt([attempt(1, { submittedAt: T0, startedAt: undefined, stoppedAt: T0 + 1, batchJobId: 'b-1' })]),
    ).toBe(undefined);
  });

  it('hands the policy the spot history of every attempt since submission', () => {
    const attempts = [
      // Queued 120 s, ran 600 s, reclaimed.
      attempt(1, {
        submittedAt: T0,
        startedAt: T0 + 120_000,
        stoppedAt: T0 + 720_000,
        outcome: { kind: 'reclaimed', reason: 'r', resumable: true },
      }),
      // Queued 1200 s and cancelled without capacity.
      attempt(2, {
        submittedAt: T0 + 730_000,
        stoppedAt: T0 + 1_930_000,
        outcome: { kind: 'capacity-starved', reason: 'r', resumable: true },
      }),
      // Running on on-demand since T0 + 1990 s: observes nothing about spot.
      attempt(3, { capacity: 'on-demand', submittedAt: T0 + 1_940_000, startedAt: T0 + 1_990_000 }),
    ];
    expect(placementStateFor(job, attempts, { spotAllowed: true }, T0 + 2_400_000)?.spotHistory).toEqual({
      availableSeconds: 600,
      unavailableSeconds: 1320,
      reclaims: 1,
    });
  });

  it('counts reclaims since the last on-demand → spot move', () => {
    const reclaimed = { kind: 'reclaimed' as const, reason: 'r', resumable: true };
    expect(
      spotTroublesSinceLastMove([
        attempt(1, { outcome: reclaimed }),
        attempt(2, { outcome: reclaimed }),
        attempt(3, { capacity: 'on-demand' }),
      ]),
    ).toEqual({ reclaims: 2, capacityCancellations: 0 });
  });

  it('reads reclaims and capacity wait from config, keeping at least one reclaim', () => {
    expect(
      placementConfigFrom(
        DEFAULT_PLACEMENT_CONFIG,
        { reclaimsBeforeOnDemand: 0, capacityWaitMinutes: 30 },
        { instanceTypes: ['g4dn.xlarge'], onDemandUsdPerHour: 0.526 },
      ),
    ).toMatchObject({ reclaimsBeforeOnDemand: 1, capacityWaitSeconds: 1800 });
  });

  it('lets the check see spot on on-demand only for tiers with three or more distinct instance types', () => {
    const visible = (instanceTypes: string[]) =>
      placementConfigFrom(
        DEFAULT_PLACEMENT_CONFIG,
        { reclaimsBeforeOnDemand: 2, capacityWaitMinutes: 20 },
        { instanceTypes, onDemandUsdPerHour: 0.526 },
      ).spotVisibleOnDemand;
    expect(visible(['g4dn.xlarge'])).toBe(false);
    expect(visible(['g4dn.xlarge', 'g4dn.xlarge', 'g5.xlarge'])).toBe(false);
    expect(visible(['g4dn.xlarge', 'g5.xlarge', 'g6.xlarge'])).toBe(true);
  });

  it('plans deadline jobs with the fleet model at the tier’s price ratio where the probe answers and spot is cheaper', () => {
    const config = (tier: { instanceTypes: string[]; onDemandUsdPerHour: number; spotUsdPerHour?: number }) =>
      placementConfigFrom(DEFAULT_PLACEMENT_CONFIG, { reclaimsBeforeOnDemand: 2, capacityWaitMinutes: 20 }, tier);
    const three = ['g4dn.xlarge', 'g5.xlarge', 'g6.xlarge'];
    expect(config({ instanceTypes: three, onDemandUsdPerHour: 0.5, spotUsdPerHour: 0.2 }).spotPlanning).toEqual({
      model: FLEET_SPOT_MODEL,
      spotPriceRatio: 0.4,
      riskAversion: 0.06,
    });
    // No probe, no spot price, or spot no cheaper: the reserve rules.
    expect(config({ instanceTypes: ['g4dn.xlarge'], onDemandUsdPerHour: 0.5, spotUsdPerHour: 0.2 }).spotPlanning).toBe(
      undefined,
    );
    expect(config({ instanceTypes: three, onDemandUsdPerHour: 0.5 }).spotPlanning).toBe(undefined);
    expect(config({ instanceTypes: three, onDemandUsdPerHour: 0.5, spotUsdPerHour: 0.5 }).spotPlanning).toBe(undefined);
  });
});

describe('decision log', () => {
  const decision = (seq: number, text: string): DecisionRecord => ({
    seq,
    at: '2026-11-20T14:00:00.000Z',
    moment: 'periodic-check',
    decision: text,
    reason: 'r',
  });
  it('numbers the next decision after the highest and finds recorded ones', () => {
    const log = [decision(1, 'a'), decision(4, 'stop-attempt 2 budget-pause'), decision(2, 'b')];
    expect(nextDecisionSeq(log)).toBe(5);
    expect(nextDecisionSeq([])).toBe(1);
    expect(hasDecision(log, 'stop-attempt 2 budget-pause')).toBe(true);
    expect(hasDecision(log, 'stop-attempt 3 budget-pause')).toBe(false);
  });
});
