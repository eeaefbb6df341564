/** Aggregates sweep settings into overall figures, the sanity check, the goal check and a markdown report. */
import { percentile } from '../stats';
import { POLICIES, type PolicyName, type SettingResult } from './sweep';

/**
 * Overall figures per policy: means over settings of the per-setting figures, the 90th percentile of every job's gap
 * pooled over the settings, and total misses.
 */
export interface OverallStats {
  /** Mean over settings of the mean normalised cost. */
  meanNormalisedCost: number;
  /** Mean over settings of the mean gap to the optimum. */
  meanGap: number;
  /** Mean over settings of the per-setting 90th-percentile gap (each setting weighs the same). */
  meanP90Gap: number;
  /** 90th percentile (nearest rank) of the gaps of every job of every setting; NaN where settings carry no gaps. */
  pooledP90Gap: number;
  /** Deadline misses over all jobs. */
  misses: number;
}

/** How many settings Trainyard's policy meets against one reference: its mean gap, its p90 gap, and both. */
export interface Standing {
  /** Settings where Trainyard's mean gap ≤ the reference's. */
  meanMet: number;
  /** Settings where Trainyard's p90 gap ≤ the reference's. */
  p90Met: number;
  /** Settings where both hold. */
  bothMet: number;
}

/** A setting where Trainyard's policy misses the goal, and by how much. */
export interface Shortfall {
  /** Trace name. */
  trace: string;
  /** Deadline, hours. */
  deadlineHours: number;
  /** Restart overhead, hours. */
  overheadHours: number;
  /** Trainyard's mean gap minus the better of Greedy's and UP's, in percentage points (≤ 0: met). */
  meanPoints: number;
  /** The same for the p90 gap. */
  p90Points: number;
}

/** Where Trainyard's policy stands against the goal over a set of settings. */
export interface GoalCheck extends Standing {
  /** Settings compared. */
  settings: number;
  /** Trainyard misses over all jobs. */
  misses: number;
  /** Whether every setting met both and nothing missed. */
  met: boolean;
  /**
   * The same counts against each baseline alone. The goal's reference, the better of the two per setting, is picked
   * with hindsight; a policy must commit to one way of deciding before it sees the setting.
   */
  against: { greedy: Standing; 'uniform-progress': Standing };
  /** The settings that miss the mean or the p90 condition, largest shortfall (on either figure) first. */
  shortfalls: Shortfall[];
}

/** Gap figures are compared with this tolerance, for float noise. */
const TOLERANCE = 1e-9;

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
        pooledP90Gap: settings.every((s) => s.policies[name].gaps !== undefined)
          ? percentile(
              settings.flatMap((s) => s.policies[name].gaps ?? []),
              90,
            )
          : Number.NaN,
        misses: settings.reduce((sum, s) => sum + s.policies[name].misses, 0),
      },
    ]),
  ) as Record<PolicyName, OverallStats>;
}

/** Gap figures of a reference in one setting: a baseline's, or the better of two. */
type Reference = (s: SettingResult) => { meanGap: number; p90Gap: number };

/** How far Trainyard's gaps are over the reference's in a setting, in percentage points (≤ 0: at or below). */
function pointsOver(s: SettingResult, reference: Reference): { meanPoints: number; p90Points: number } {
  const { meanGap, p90Gap } = reference(s);
  return {
    meanPoints: (s.policies.trainyard.meanGap - meanGap) * 100,
    p90Points: (s.policies.trainyard.p90Gap - p90Gap) * 100,
  };
}

/** Whether a figure `points` over its reference is met (float noise of TOLERANCE allowed). */
const met = (points: number): boolean => points <= TOLERANCE * 100;

/** Trainyard's standing against a reference. */
function standing(settings: readonly SettingResult[], reference: Reference): Standing {
  let meanMet = 0;
  let p90Met = 0;
  let bothMet = 0;
  for (const s of settings) {
    const { meanPoints, p90Points } = pointsOver(s, reference);
    if (met(meanPoints)) meanMet++;
    if (met(p90Points)) p90Met++;
    if (met(meanPoints) && met(p90Points)) bothMet++;
  }
  return { meanMet, p90Met, bothMet };
}

/** The better of Greedy's and UP's mean gap and, separately, of their p90 gaps: the goal's reference in a setting. */
const betterBaseline: Reference = (s) => {
  const { greedy, 'uniform-progress': up } = s.policies;
  return { meanGap: Math.min(greedy.meanGap, up.meanGap), p90Gap: Math.min(greedy.p90Gap, up.p90Gap) };
};

/** Compares Trainyard with the better of Greedy and UP in every setting, and with each of them alone. */
export function goalCheck(settings: readonly SettingResult[]): GoalCheck {
  const goal = standing(settings, betterBaseline);
  const misses = settings.reduce((sum, s) => sum + s.policies.trainyard.misses, 0);
  const shortfalls = settings
    .map(
      (s): Shortfall => ({
        trace: s.trace,
        deadlineHours: s.deadlineHours,
        overheadHours: s.overheadHours,
        ...pointsOver(s, betterBaseline),
      }),
    )
    .filter((f) => !met(f.meanPoints) || !met(f.p90Points))
    .sort((a, b) => Math.max(b.meanPoints, b.p90Points) - Math.max(a.meanPoints, a.p90Points));
  return {
    ...goal,
    settings: settings.length,
    misses,
    met: goal.bothMet === settings.length && misses === 0,
    against: {
      greedy: standing(settings, (s) => s.policies.greedy),
      'uniform-progress': standing(settings, (s) => s.policies['uniform-progress']),
    },
    shortfalls,
  };
}

/** The sanity subset: the four 2022 traces, D ∈ {52, 60, 70, 92} h (70 when swept, else the nearest). */
export function sanitySubset(settings: readonly SettingResult[]): SettingResult[] {
  return settings.filter(
    (s) =>
      s.trace.includes('aws-10-26-2022') && [52, 60, 70, 72, 92].includes(s.deadlineHours) && s.deadlineHours !== 72,
  );
}

const pct = (x: number): string => `${(x * 100).toFixed(1)} %`;
/** Points over the reference, to a thousandth (a miss can be that close); a met figure reads as 0 or below. */
const points = (x: number): string => (x > 0 ? `+${x.toFixed(3)}` : x > -0.0005 ? '0.000' : x.toFixed(3));
const shortTrace = (name: string): string => name.replace(/^.*\/(aws-[0-9-]+)\/(.*)\.json$/, '$2 ($1)');

/** Markdown: overall table, goal line, and the per-setting table. */
export function markdownReport(settings: readonly SettingResult[], title: string): string {
  const lines: string[] = [`### ${title}`, ''];
  const all = overall(settings);
  lines.push(
    '| policy | mean cost / on-demand | mean gap to optimum | mean p90 gap | p90 gap of all jobs | misses |',
    '|---|---|---|---|---|---|',
  );
  for (const name of POLICIES) {
    const o = all[name];
    lines.push(
      `| ${name} | ${o.meanNormalisedCost.toFixed(3)} | ${pct(o.meanGap)} | ${pct(o.meanP90Gap)} | ` +
        `${Number.isNaN(o.pooledP90Gap) ? '—' : pct(o.pooledP90Gap)} | ${o.misses} |`,
    );
  }
  lines.push(
    '',
    "Mean gap and mean p90 gap: each setting's figure (over its jobs), averaged over the settings. p90 gap of all " +
      "jobs: the 90th percentile of every job's gap, all settings pooled.",
  );
  const goal = goalCheck(settings);
  const n = goal.settings;
  const row = (name: string, st: Standing): string =>
    `| ${name} | ${st.meanMet}/${n} | ${st.p90Met}/${n} | ${st.bothMet}/${n} |`;
  lines.push(
    '',
    `Goal (Trainyard's mean and p90 gap ≤ the better of Greedy and UP in every setting, no misses): ` +
      `${goal.met ? 'met' : 'NOT met'} — mean in ${goal.meanMet}/${n} settings, p90 in ${goal.p90Met}/${n}, ` +
      `both in ${goal.bothMet}/${n}, ${goal.misses} misses.`,
    '',
    "Settings where Trainyard's gap is at or below the reference's (the better of the two is picked per " +
      'setting, with hindsight):',
    '',
    '| reference | mean gap | p90 gap | both |',
    '|---|---|---|---|',
    row('greedy', goal.against.greedy),
    row('uniform-progress', goal.against['uniform-progress']),
    row('better of the two', goal),
  );
  if (goal.shortfalls.length > 0) {
    const close = goal.shortfalls.filter((f) => f.meanPoints < 0.1 && f.p90Points < 0.1).length;
    lines.push(
      '',
      `Settings that miss the goal, largest shortfall first: Trainyard's gap minus the better of Greedy's and UP's, ` +
        `in points (≤ 0: that figure is met). ${close} of ${goal.shortfalls.length} miss by under 0.1 point on both.`,
      '',
      '| trace | D h | d h | mean gap, points over | p90 gap, points over |',
      '|---|---|---|---|---|',
      ...goal.shortfalls.map(
        (f) =>
          `| ${shortTrace(f.trace)} | ${f.deadlineHours} | ${f.overheadHours} | ${points(f.meanPoints)} | ` +
          `${points(f.p90Points)} |`,
      ),
    );
  }
  lines.push(
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
