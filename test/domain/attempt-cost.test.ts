import { describe, expect, it } from 'vitest';
import { attemptPrice, costOfAttempt, costOfUnseenEnd } from '../../lambdas/domain/attempt-cost';
import { recordedCost } from '../../lambdas/domain/watch';
import { parseConfig } from '../../lib/config';
import { attemptRecord } from '../support/records';

const gpuSmall = parseConfig({}).tiers.find((t) => t.id === 'gpu-small');
if (!gpuSmall) throw new Error('seed tier gpu-small missing');
const T0 = Date.UTC(2026, 10, 20, 12, 0, 0);

describe('attemptPrice', () => {
  it.each([
    [
      'the recorded price when the instance start was metered',
      { usdPerHour: 0.1897, capacity: 'spot' as const },
      0.1897,
    ],
    ['the configured spot price for a spot attempt with none recorded', { capacity: 'spot' as const }, 0.19],
    ['the on-demand price for an on-demand attempt with none recorded', { capacity: 'on-demand' as const }, 0.526],
  ])('uses %s', (_name, attempt, expected) => {
    expect(attemptPrice(attempt, gpuSmall)).toBe(expected);
  });
});

describe('costOfAttempt', () => {
  it('bills per second at the price paid, to the micro-dollar: 2404 s at $0.1897/h = $0.12667689 → $0.126677', () => {
    const cost = costOfAttempt(
      { usdPerHour: 0.1897, capacity: 'spot', nodes: 1 },
      { attempts: [{ startedAt: T0, stoppedAt: T0 + 2_404_000 }], startedAt: T0, stoppedAt: T0 + 2_404_000 },
      gpuSmall,
    );
    expect(cost).toEqual({ startedAt: T0, stoppedAt: T0 + 2_404_000, usdPerHour: 0.1897, costUsd: 0.126677 });
  });

  it('bills AWS’s 60 s minimum for a 10 s attempt: 60 s at $0.526/h = $0.0087667 → $0.008767', () => {
    const cost = costOfAttempt(
      { capacity: 'on-demand', nodes: 1 },
      { attempts: [{ startedAt: T0, stoppedAt: T0 + 10_000 }], startedAt: T0, stoppedAt: T0 + 10_000 },
      gpuSmall,
    );
    expect(cost.costUsd).toBe(0.008767);
  });

  it('adds every Batch-level try that started (an image pull retry still ran an instance)', () => {
    // 3600 s + 1800 s at $0.526/h on 1 node = $0.526 + $0.263 = $0.789
    const cost = costOfAttempt(
      { capacity: 'on-demand', nodes: 1 },
      {
        attempts: [
          { startedAt: T0, stoppedAt: T0 + 3_600_000 },
          { startedAt: T0 + 3_700_000, stoppedAt: T0 + 5_500_000 },
        ],
      },
      gpuSmall,
    );
    expect(cost).toMatchObject({ startedAt: T0, stoppedAt: T0 + 5_500_000, costUsd: 0.789 });
  });

  it('charges nothing for an attempt that never started (cancelled while RUNNABLE)', () => {
    expect(costOfAttempt({ capacity: 'spot', nodes: 1 }, { attempts: [], stoppedAt: T0 }, gpuSmall)).toEqual({
      usdPerHour: 0.19,
      costUsd: 0,
      stoppedAt: T0,
    });
  });

  it('multiplies by nodes: 2 nodes × 1 h at $5.672/h = $11.344', () => {
    const cost = costOfAttempt(
      { capacity: 'on-demand', nodes: 2, usdPerHour: 5.672 },
      { attempts: [{ startedAt: T0, stoppedAt: T0 + 3_600_000 }] },
      gpuSmall,
    );
    expect(cost.costUsd).toBe(11.344);
  });
});

describe('costOfUnseenEnd (Batch no longer reports the job)', () => {
  const spot = { capacity: 'spot' as const, nodes: 1, usdPerHour: 0.1897 };

  it('bills from the recorded start to the last sign of it running: 2404 s at $0.1897/h = $0.126677', () => {
    expect(costOfUnseenEnd({ ...spot, startedAt: T0 }, T0 + 2_404_000, gpuSmall)).toEqual({
      startedAt: T0,
      stoppedAt: T0 + 2_404_000,
      usdPerHour: 0.1897,
      costUsd: 0.126677,
    });
  });

  it('bills the start alone (AWS’s 60 s minimum) without a later sign: 60 s at $0.526/h = $0.008767', () => {
    const started = { capacity: 'on-demand' as const, nodes: 1, startedAt: T0 };
    for (const sign of [undefined, T0 - 5_000, T0]) {
      expect(costOfUnseenEnd(started, sign, gpuSmall)).toEqual({
        startedAt: T0,
        stoppedAt: T0,
        usdPerHour: 0.526,
        costUsd: 0.008767,
      });
    }
  });

  it('bills one start at its last sign when no start was recorded: 60 s at $3.06/h = $0.051', () => {
    expect(costOfUnseenEnd({ ...spot, usdPerHour: 3.06 }, T0 + 60_000, gpuSmall)).toEqual({
      startedAt: T0 + 60_000,
      stoppedAt: T0 + 60_000,
      usdPerHour: 3.06,
      costUsd: 0.051,
    });
  });

  it('bills nothing with neither a recorded start nor a sign of it running', () => {
    expect(costOfUnseenEnd(spot, undefined, gpuSmall)).toEqual({ usdPerHour: 0.1897, costUsd: 0 });
  });

  it('multiplies by nodes: 2 nodes × 1 h at $5.672/h = $11.344', () => {
    const cost = costOfUnseenEnd({ ...spot, nodes: 2, usdPerHour: 5.672, startedAt: T0 }, T0 + 3_600_000, gpuSmall);
    expect(cost.costUsd).toBe(11.344);
  });
});

describe('a job of many short attempts', () => {
  it('is billed what its attempts cost together, rounded to the cent once, not each attempt rounded on its own', () => {
    // Ten spot attempts reclaimed within a minute, each billed AWS's 60 s minimum at $0.19/h: $0.0031667 each,
    // $0.031667 in all → $0.03. Rounded to the cent one by one, each would have been $0.00.
    const attempts = Array.from({ length: 10 }, (_, i) => {
      const start = T0 + i * 120_000;
      const { costUsd } = costOfAttempt(
        { usdPerHour: 0.19, capacity: 'spot', nodes: 1 },
        { attempts: [{ startedAt: start, stoppedAt: start + 30_000 }] },
        gpuSmall,
      );
      return attemptRecord({ attempt: i + 1, status: 'FAILED', costUsd });
    });

    expect(recordedCost(attempts)).toBe(0.03);
  });
});
