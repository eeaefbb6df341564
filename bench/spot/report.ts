/** Aggregates sweep settings into overall figures, the sanity check, the goal check and a markdown report. */
import { POLICIES, type PolicyName, type SettingResult } from './sweep';

/** Overall figures per policy: means over settings, pooled 90th percentile over every job, total misses. */
export interface OverallStats {
  /** Mean over settings of the mean normalised cost. */
  meanNormalisedCost: number;
  /** Mean over settings of the mean gap to the optimum. */
  meanGap: number;
  /** Mean over settings of the per-setting 90th-percentile gap. */
  meanP90Gap: number;
  /** Deadline misses over all jobs. */
  misses: number;
}

/** Where Trainyard's policy stands against the goal in one setting. */
export interface GoalCheck {
  /** Settings where Trainyard's mean gap ≤ min(Greedy, UP). */
  meanMet: number;
  /** Settings where Trainyard's p90 gap ≤ min(Greedy, UP). */
  p90Met: number;
  /** Settings compared. */
  settings: number;
  /** Trainyard misses over all jobs. */
  misses: number;
  /** Whether every setting met both and nothing missed. */
  met: boolean;
}

const mean = (values: readonly number[]): number => values.reduce((s, v) => s + v, 0) / Math.max(1, values.length);

/** Overall figures per policy over a set of settings. */
export function overall(settings: readonly SettingResult[]): Record<PolicyName, OverallStats> {
  return Object.fromEntries(
    POLICIES.map((name) => [
      name,
      {
        meanNormalisedCost: mean(settings.map((s) => s.policies[name].meanNormalisedCost)),
        meanGap: mean(settings.map((s) => s.policies[name].meanGap)),
        meanP90Gap: mean(settings.map((s) => s.policies[name].p90Gap)),
        misses: settings.reduce((sum, s) => sum + s.policies[name].misses, 0),
      },
    ]),
  ) as Record<PolicyName, OverallStats>;
}

/** Compares Trainyard with the better of Greedy and UP in every setting (tolerance 1e-9 for float noise). */
export function goalCheck(settings: readonly SettingResult[]): GoalCheck {
  let meanMet = 0;
  let p90Met = 0;
  let misses = 0;
  for (const s of settings) {
    const { greedy, 'uniform-progress': up, trainyard } = s.policies;
    if (trainyard.meanGap <= Math.min(greedy.meanGap, up.meanGap) + 1e-9) meanMet++;
    if (trainyard.p90Gap <= Math.min(greedy.p90Gap, up.p90Gap) + 1e-9) p90Met++;
    misses += trainyard.misses;
  }
  const n = settings.length;
  return { meanMet, p90Met, settings: n, misses, met: meanMet === n && p90Met === n && misses === 0 };
}

/** The sanity subset: the four 2022 traces, D ∈ {52, 60, 70, 92} h (70 when swept, else the nearest). */
export function sanitySubset(settings: readonly SettingResult[]): SettingResult[] {
  return settings.filter(
    (s) =>
      s.trace.includes('aws-10-26-2022') && [52, 60, 70, 72, 92].includes(s.deadlineHours) && s.deadlineHours !== 72,
  );
}

const pct = (x: number): string => `${(x * 100).toFixed(1)} %`;
const shortTrace = (name: string): string => name.replace(/^.*\/(aws-[0-9-]+)\/(.*)\.json$/, '$2 ($1)');

/** Markdown: overall table, goal line, and the per-setting table. */
export function markdownReport(settings: readonly SettingResult[], title: string): string {
  const lines: string[] = [`### ${title}`, ''];
  const all = overall(settings);
  lines.push(
    '| policy | mean cost / on-demand | mean gap to optimum | mean p90 gap | misses |',
    '|---|---|---|---|---|',
  );
  for (const name of POLICIES) {
    const o = all[name];
    lines.push(
      `| ${name} | ${o.meanNormalisedCost.toFixed(3)} | ${pct(o.meanGap)} | ${pct(o.meanP90Gap)} | ${o.misses} |`,
    );
  }
  const goal = goalCheck(settings);
  lines.push(
    '',
    `Goal (Trainyard's mean and p90 gap ≤ the better of Greedy and UP in every setting, no misses): ` +
      `${goal.met ? 'met' : 'NOT met'} — mean in ${goal.meanMet}/${goal.settings} settings, ` +
      `p90 in ${goal.p90Met}/${goal.settings}, ${goal.misses} misses.`,
    '',
    '| trace | D h | d h | cost/OD greedy | UP | trainyard | optimum | mean gap greedy | UP | trainyard | p90 gap greedy | UP | trainyard | misses G/UP/T |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  );
  for (const s of settings) {
    const p = s.policies;
    const g = p.greedy;
    const u = p['uniform-progress'];
    const t = p.trainyard;
    lines.push(
      `| ${shortTrace(s.trace)} | ${s.deadlineHours} | ${s.overheadHours} | ${g.meanNormalisedCost.toFixed(3)} | ` +
        `${u.meanNormalisedCost.toFixed(3)} | ${t.meanNormalisedCost.toFixed(3)} | ${p.optimum.meanNormalisedCost.toFixed(3)} | ` +
        `${pct(g.meanGap)} | ${pct(u.meanGap)} | ${pct(t.meanGap)} | ${pct(g.p90Gap)} | ${pct(u.p90Gap)} | ${pct(t.p90Gap)} | ` +
        `${g.misses}/${u.misses}/${t.misses} |`,
    );
  }
  return lines.join('\n');
}
