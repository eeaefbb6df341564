import { describe, expect, it } from 'vitest';
import { overall } from '../../bench/spot/report';
import { FULL_SWEEP, runSetting, type SettingResult } from '../../bench/spot/sweep';
import { loadTraces } from '../../bench/spot/traces';

// The sanity check for the simulator, on 40 of the 300 offsets to keep the test fast (the full 300 are in
// `npm run bench`): 2022 traces, C = 48 h, D ∈ {52, 60, 70, 92} h, d ∈ {0.05, 0.1, 0.3} h. An independent
// implementation measured mean cost / on-demand ≈ 0.62 Greedy, 0.59 UP, 0.53 optimum; gap ≈ 20 % Greedy, ≈ 13 % UP;
// no misses; UP worse than Greedy at D = 92 h.
describe('spot simulator sanity check against the published figures', () => {
  const traces = loadTraces().filter((t) => t.name.includes('aws-10-26-2022'));
  const options = { ...FULL_SWEEP, offsets: 40 };
  const settings: SettingResult[] = traces.flatMap((trace) =>
    [52, 60, 70, 92].flatMap((deadline) =>
      options.overheadHours.map((overhead) => runSetting(trace, deadline, overhead, options)),
    ),
  );
  const all = overall(settings);

  it('uses the four 2022 traces', () => {
    expect(traces).toHaveLength(4);
  });

  it('reproduces mean cost relative to on-demand only', () => {
    expect(all.greedy.meanNormalisedCost).toBeGreaterThan(0.58);
    expect(all.greedy.meanNormalisedCost).toBeLessThan(0.66);
    expect(all['uniform-progress'].meanNormalisedCost).toBeGreaterThan(0.55);
    expect(all['uniform-progress'].meanNormalisedCost).toBeLessThan(0.63);
    expect(all.optimum.meanNormalisedCost).toBeGreaterThan(0.5);
    expect(all.optimum.meanNormalisedCost).toBeLessThan(0.56);
  });

  it('reproduces the mean gaps to the optimum and has no misses', () => {
    expect(all.greedy.meanGap).toBeGreaterThan(0.15);
    expect(all.greedy.meanGap).toBeLessThan(0.25);
    expect(all['uniform-progress'].meanGap).toBeGreaterThan(0.09);
    expect(all['uniform-progress'].meanGap).toBeLessThan(0.17);
    for (const name of ['greedy', 'uniform-progress', 'optimum'] as const) expect(all[name].misses).toBe(0);
  });

  it('finds UP worse than Greedy at the loose deadline (92 h)', () => {
    const loose = overall(settings.filter((s) => s.deadlineHours === 92));
    expect(loose['uniform-progress'].meanGap).toBeGreaterThan(loose.greedy.meanGap);
  });
});
