// The spot bench drives Trainyard's policy with the placement config the deployed lifecycle builds for the seed tier
// it names, so a change to the seed tiers or the spot policy config shows up in the benchmark (issue 7: "the benchmark
// and production must never diverge").
import { describe, expect, it } from 'vitest';
import { BENCH_TIER, deployedPlacementConfig } from '../../bench/spot';
import { FLEET_SPOT_MODEL } from '../../lambdas/domain/spot-fleet-model';
import { parseConfig } from '../../lib/config';

describe('the spot bench’s Trainyard config', () => {
  it('is the seed config’s: 2 reclaims, a 20-minute capacity wait, the 5-minute check, a probe that can answer and the fleet plan', () => {
    // gpu-large: spot $0.50/h against $1.212/h on-demand (each setting then supplies the prices).
    expect(deployedPlacementConfig()).toEqual({
      reclaimsBeforeOnDemand: 2,
      capacityWaitSeconds: 1200,
      checkIntervalSeconds: 300,
      spotVisibleOnDemand: true,
      spotPlanning: { model: FLEET_SPOT_MODEL, spotPriceRatio: 0.5 / 1.212, riskAversion: 0.06 },
    });
  });

  it('names a seed tier that allows spot and lists at least three instance types', () => {
    const tier = parseConfig({}).tiers.find((t) => t.id === BENCH_TIER);
    expect(tier?.spotAllowed).toBe(true);
    expect(new Set(tier?.instanceTypes).size).toBeGreaterThanOrEqual(3);
  });
});
