// The fleet model the deployed planner ships (lambdas/domain/spot-fleet-model.ts) must be the fit of the traces the
// benchmark replays: regenerate it with `npx tsx scripts/fit-spot-model.ts --write` when the traces change.
import { describe, expect, it } from 'vitest';
import { heldOutFleetModel } from '../../bench/spot';
import { fitFleetModel, stretchesOf } from '../../bench/spot/spot-model';
import { loadTraces } from '../../bench/spot/traces';
import { FLEET_SPOT_MODEL } from '../../lambdas/domain/spot-fleet-model';
import { roundedSpotLengthModel } from '../../lambdas/domain/spot-planner';

describe('FLEET_SPOT_MODEL', () => {
  it('is the rounded fit of every spot trace', () => {
    expect(FLEET_SPOT_MODEL).toEqual(roundedSpotLengthModel(fitFleetModel(loadTraces())));
  });

  it('is held out of the sweep: the jobs of each trace plan with a fit of the other traces', () => {
    const traces = loadTraces();
    for (const trace of traces) {
      const model = heldOutFleetModel(traces, trace);
      expect(model).toEqual(roundedSpotLengthModel(fitFleetModel(traces.filter((t) => t !== trace))));
      expect(model, trace.name).not.toEqual(FLEET_SPOT_MODEL);
    }
  });

  it('says what the traces say: young stretches end more often than old ones, and outages end faster than runs', () => {
    const first = (hazards: readonly number[]) => hazards[0] as number;
    const last = (hazards: readonly number[]) => hazards.at(-1) as number;
    expect(first(FLEET_SPOT_MODEL.availableHazards)).toBeGreaterThan(last(FLEET_SPOT_MODEL.availableHazards));
    expect(first(FLEET_SPOT_MODEL.unavailableHazards)).toBeGreaterThan(first(FLEET_SPOT_MODEL.availableHazards));
  });
});

describe('stretchesOf', () => {
  it('cuts a trace into stretches, without the first (its start is unseen) and with the last open', () => {
    const trace = { gapSeconds: 10, available: Uint8Array.from([1, 1, 0, 0, 0, 1, 0]) };
    expect(stretchesOf(trace)).toEqual([
      { available: false, seconds: 30, ended: true },
      { available: true, seconds: 10, ended: true },
      { available: false, seconds: 10, ended: false },
    ]);
  });
});
