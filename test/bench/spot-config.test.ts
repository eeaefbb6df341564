// The spot bench drives Trainyard's policy with the placement config the deployed lifecycle builds for the seed tier
// it names, so a change to the seed tiers or the spot policy config shows up in the benchmark (issue 7: "the benchmark
// and production must never diverge").
import { describe, expect, it } from 'vitest';
import { BENCH_TIER, deployedPlacementConfig } from '../../bench/spot';
import { parseConfig } from '../../lib/config';

describe('the spot bench’s Trainyard config', () => {
  it('is the seed config’s: 2 reclaims, a 20-minute capacity wait, the 5-minute check, and a probe that can answer', () => {
    expect(deployedPlacementConfig()).toEqual({
      reclaimsBeforeOnDemand: 2,
      capacityWaitSeconds: 1200,
      checkIntervalSeconds: 300,
      spotVisibleOnDemand: true,
    });
  });

  it('names a seed tier that allows spot and lists at least three instance types', () => {
    const tier = parseConfig({}).tiers.find((t) => t.id === BENCH_TIER);
    expect(tier?.spotAllowed).toBe(true);
    expect(new Set(tier?.instanceTypes).size).toBeGreaterThanOrEqual(3);
  });
});
