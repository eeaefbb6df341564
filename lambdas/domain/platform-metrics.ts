/**
 * Trainyard's own CloudWatch metrics. One catalogue names each metric, its unit, dimensions, the statistic that reads
 * it and who emits it; the emitting handlers, the operations dashboard (lib/observability/dashboard.ts) and the table
 * in docs/operations.md (which says what each value means) all follow it, so a metric cannot be graphed under one
 * name and emitted under another.
 *
 * Metrics travel as CloudWatch embedded metric format (EMF) documents, one JSON object per line on a Lambda's
 * standard output: CloudWatch Logs extracts the metrics, so publishing needs no API call and no permission beyond the
 * function's logs (AWS "Specification: Embedded metric format"). A document carries one value per metric for one set
 * of dimension values, so datums are grouped by their dimension values, one document each.
 *
 * Every metric is a gauge read at its emitter's moment (the budget watch's 5-minute tick), or a count emitted once
 * per thing counted; a redelivered tick emits the same gauge at the same timestamp, which the Maximum or Minimum
 * statistic the catalogue names reads as one value.
 */

/** CloudWatch namespace of every Trainyard metric. */
export const METRICS_NAMESPACE = 'Trainyard';

/** EMF and CloudWatch units the catalogue uses. */
export type MetricUnit = 'Count' | 'Percent' | 'None';

/** The CloudWatch statistic that reads a metric right. */
export type MetricStatistic = 'Maximum' | 'Minimum' | 'Sum';

/** One catalogue entry. */
export interface MetricSpec {
  readonly unit: MetricUnit;
  /** Dimension names, in the order the document lists them; [] for a platform-wide figure. */
  readonly dimensions: readonly string[];
  readonly statistic: MetricStatistic;
  /** The handler that emits it. */
  readonly emitter: 'budget-watch' | 'interruption' | 'attempt-outcome';
}

/** Every metric Trainyard publishes (docs/operations.md, "Dashboard and metrics", says what each value means). */
export const PLATFORM_METRICS = {
  /** Jobs with a running attempt, by the capacity it runs on, at each check. */
  RunningJobs: {
    unit: 'Count',
    dimensions: ['Capacity'],
    statistic: 'Maximum',
    emitter: 'budget-watch',
  },
  /** Jobs whose attempt waits to be placed, at each check. */
  WaitingJobs: {
    unit: 'Count',
    dimensions: [],
    statistic: 'Maximum',
    emitter: 'budget-watch',
  },
  /** What a team's running attempts cost per hour, USD/h, at each check. */
  SpendRate: {
    unit: 'None',
    dimensions: ['Team'],
    statistic: 'Maximum',
    emitter: 'budget-watch',
  },
  /** Spent and reserved as a percentage of the team's monthly budget, at each check. */
  BudgetUsed: {
    unit: 'Percent',
    dimensions: ['Team'],
    statistic: 'Maximum',
    emitter: 'budget-watch',
  },
  /** 1 when the probe saw spot capacity for the tier, 0 when not. */
  SpotAvailable: {
    unit: 'None',
    dimensions: ['Tier'],
    statistic: 'Minimum',
    emitter: 'budget-watch',
  },
  /** Spot interruption warnings, once per attempt. */
  SpotInterruptions: {
    unit: 'Count',
    dimensions: ['Tier'],
    statistic: 'Sum',
    emitter: 'interruption',
  },
  /**
   * Spot attempts that ended reclaimed, once per attempt: EC2 reclaims (with or without a warning the platform saw)
   * and Fargate Spot's on the CPU tiers, which send no EC2 warning. Emitted where an attempt's outcome is recorded
   * (attempt-outcome, and execution-ended and finalize for an ending job's attempts).
   */
  SpotReclaims: {
    unit: 'Count',
    dimensions: ['Tier'],
    statistic: 'Sum',
    emitter: 'attempt-outcome',
  },
} as const satisfies Record<string, MetricSpec>;

/** A metric's name. */
export type PlatformMetricName = keyof typeof PLATFORM_METRICS;

/** One value of a catalogue metric. */
export interface MetricDatum {
  readonly metric: PlatformMetricName;
  readonly value: number;
  /** One value per dimension the catalogue names for the metric, and no others. */
  readonly dimensions?: Readonly<Record<string, string>>;
}

/** One EMF document: `_aws` metadata, then each dimension and metric as a top-level member. */
export interface EmfDocument {
  readonly _aws: {
    readonly Timestamp: number;
    readonly CloudWatchMetrics: ReadonlyArray<{
      readonly Namespace: string;
      readonly Dimensions: ReadonlyArray<readonly string[]>;
      readonly Metrics: ReadonlyArray<{ readonly Name: string; readonly Unit: MetricUnit }>;
    }>;
  };
  readonly [member: string]: unknown;
}

/** Raised for a datum the catalogue does not allow; nothing of its batch is published. */
export class InvalidMetric extends Error {
  override name = 'InvalidMetric';
}

/** Longest dimension value EMF accepts, characters. */
export const MAX_DIMENSION_VALUE_LENGTH = 1024;

function checkDatum(datum: MetricDatum): Array<[string, string]> {
  const spec: MetricSpec | undefined = (PLATFORM_METRICS as Record<string, MetricSpec>)[datum.metric];
  if (!spec) {
    throw new InvalidMetric(
      `unknown metric "${datum.metric}"; Trainyard publishes ${Object.keys(PLATFORM_METRICS).join(', ')}`,
    );
  }
  if (!Number.isFinite(datum.value)) {
    throw new InvalidMetric(`metric ${datum.metric}: value must be a finite number, got ${datum.value}`);
  }
  const given = Object.keys(datum.dimensions ?? {}).sort();
  const wanted = [...spec.dimensions].sort();
  if (given.join(',') !== wanted.join(',')) {
    throw new InvalidMetric(
      `metric ${datum.metric}: dimensions must be [${wanted.join(', ')}], got [${given.join(', ')}]`,
    );
  }
  return spec.dimensions.map((name) => {
    const value = datum.dimensions?.[name] ?? '';
    if (value.length === 0 || value.length > MAX_DIMENSION_VALUE_LENGTH) {
      throw new InvalidMetric(
        `metric ${datum.metric}: dimension ${name} must be 1–${MAX_DIMENSION_VALUE_LENGTH} characters, got ${value.length}`,
      );
    }
    return [name, value];
  });
}

/**
 * The EMF documents that publish `datums` as measured at `timestampMs`: one per set of dimension values (a metric
 * whose dimensions differ from another's, or whose values do, needs a document of its own). Throws
 * {@link InvalidMetric} for a datum outside the catalogue, or for two values of one metric with the same dimensions.
 */
export function emfDocuments(datums: readonly MetricDatum[], timestampMs: number): EmfDocument[] {
  if (!Number.isInteger(timestampMs) || timestampMs < 0) {
    throw new InvalidMetric(`timestamp must be whole milliseconds since the epoch, got ${timestampMs}`);
  }
  const groups = new Map<string, { dimensions: Array<[string, string]>; datums: MetricDatum[] }>();
  for (const datum of datums) {
    const dimensions = checkDatum(datum);
    const key = JSON.stringify(dimensions);
    const group = groups.get(key) ?? { dimensions, datums: [] };
    if (group.datums.some((d) => d.metric === datum.metric)) {
      throw new InvalidMetric(`metric ${datum.metric} has two values for dimensions ${key}`);
    }
    group.datums.push(datum);
    groups.set(key, group);
  }
  return [...groups.values()].map(({ dimensions, datums: grouped }) => {
    const document: Record<string, unknown> = {
      _aws: {
        Timestamp: timestampMs,
        CloudWatchMetrics: [
          {
            Namespace: METRICS_NAMESPACE,
            Dimensions: [dimensions.map(([name]) => name)],
            Metrics: grouped.map((d) => ({ Name: d.metric, Unit: PLATFORM_METRICS[d.metric].unit })),
          },
        ],
      },
    };
    for (const [name, value] of dimensions) document[name] = value;
    for (const d of grouped) document[d.metric] = d.value;
    return document as unknown as EmfDocument;
  });
}
