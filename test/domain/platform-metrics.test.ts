import { afterEach, describe, expect, it, vi } from 'vitest';
import { emfDocuments, InvalidMetric, type MetricDatum, PLATFORM_METRICS } from '../../lambdas/domain/platform-metrics';
import { awsControlPlane } from '../../lambdas/shared/aws-control-plane';
import type { ControlPlane } from '../../lambdas/shared/control-plane';
import { emfMetricPublisher, stdoutMetricPublisher } from '../../lambdas/shared/metrics';
import { extractMetrics } from '../support/emf';

const AT = Date.UTC(2026, 10, 22, 9, 5, 0);

describe('EMF documents', () => {
  it('puts metrics that share dimension values in one document, and each other set of values in its own', () => {
    const datums: MetricDatum[] = [
      { metric: 'SpendRate', value: 0.716, dimensions: { Team: 'vision' } },
      { metric: 'BudgetUsed', value: 10, dimensions: { Team: 'vision' } },
      { metric: 'SpendRate', value: 0, dimensions: { Team: 'nlp' } },
      { metric: 'WaitingJobs', value: 2 },
    ];

    expect(emfDocuments(datums, AT)).toEqual([
      {
        _aws: {
          Timestamp: AT,
          CloudWatchMetrics: [
            {
              Namespace: 'Trainyard',
              Dimensions: [['Team']],
              Metrics: [
                { Name: 'SpendRate', Unit: 'None' },
                { Name: 'BudgetUsed', Unit: 'Percent' },
              ],
            },
          ],
        },
        Team: 'vision',
        SpendRate: 0.716,
        BudgetUsed: 10,
      },
      {
        _aws: {
          Timestamp: AT,
          CloudWatchMetrics: [
            { Namespace: 'Trainyard', Dimensions: [['Team']], Metrics: [{ Name: 'SpendRate', Unit: 'None' }] },
          ],
        },
        Team: 'nlp',
        SpendRate: 0,
      },
      {
        _aws: {
          Timestamp: AT,
          CloudWatchMetrics: [
            { Namespace: 'Trainyard', Dimensions: [[]], Metrics: [{ Name: 'WaitingJobs', Unit: 'Count' }] },
          ],
        },
        WaitingJobs: 2,
      },
    ]);
  });

  it('is nothing for no datums', () => {
    expect(emfDocuments([], AT)).toEqual([]);
  });

  it.each([
    [{ metric: 'Jobs', value: 1 }, 'unknown metric "Jobs"; Trainyard publishes RunningJobs, WaitingJobs'],
    [{ metric: 'WaitingJobs', value: Number.NaN }, 'WaitingJobs: value must be a finite number, got NaN'],
    [{ metric: 'SpendRate', value: 1 }, 'SpendRate: dimensions must be [Team], got []'],
    [
      { metric: 'SpendRate', value: 1, dimensions: { Team: 'a', Tier: 'gpu-small' } },
      'SpendRate: dimensions must be [Team], got [Team, Tier]',
    ],
    [
      { metric: 'SpotAvailable', value: 1, dimensions: { Tier: '' } },
      'dimension Tier must be 1–1024 characters, got 0',
    ],
  ])('refuses %j: %s', (datum, message) => {
    expect(() => emfDocuments([datum as MetricDatum], AT)).toThrow(InvalidMetric);
    expect(() => emfDocuments([datum as MetricDatum], AT)).toThrow(message);
  });

  it('refuses two values of one metric with the same dimensions, and a timestamp that is not whole milliseconds', () => {
    const twice: MetricDatum[] = [
      { metric: 'RunningJobs', value: 1, dimensions: { Capacity: 'spot' } },
      { metric: 'RunningJobs', value: 2, dimensions: { Capacity: 'spot' } },
    ];
    expect(() => emfDocuments(twice, AT)).toThrow('metric RunningJobs has two values for dimensions');
    expect(() => emfDocuments([{ metric: 'WaitingJobs', value: 1 }], 1.5)).toThrow(
      'timestamp must be whole milliseconds since the epoch, got 1.5',
    );
  });

  it('names no metric after a dimension, so no document member stands for both', () => {
    const dimensions = new Set<string>(Object.values(PLATFORM_METRICS).flatMap((spec) => [...spec.dimensions]));
    for (const name of Object.keys(PLATFORM_METRICS)) {
      expect(dimensions.has(name)).toBe(false);
      expect(name).toMatch(/^[A-Za-z][A-Za-z0-9]{0,254}$/);
    }
  });
});

describe('metric publishers', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('writes one JSON line per document that CloudWatch reads back as the values published', async () => {
    const written: string[] = [];
    const publisher = emfMetricPublisher((lines) => {
      written.push(lines);
    });

    await publisher.publish(
      [
        { metric: 'RunningJobs', value: 3, dimensions: { Capacity: 'spot' } },
        { metric: 'RunningJobs', value: 1, dimensions: { Capacity: 'on-demand' } },
      ],
      AT,
    );

    expect(written).toHaveLength(1);
    const lines = written[0]?.split('\n') ?? [];
    expect(lines.at(-1)).toBe('');
    expect(extractMetrics(lines).map(({ dimensions, value }) => [dimensions.Capacity, value])).toEqual([
      ['spot', 3],
      ['on-demand', 1],
    ]);
  });

  it('writes nothing for no datums, and nothing of a batch with one bad datum', async () => {
    const write = vi.fn();
    const publisher = emfMetricPublisher(write);

    await publisher.publish([], AT);
    await expect(
      publisher.publish(
        [
          { metric: 'WaitingJobs', value: 1 },
          { metric: 'WaitingJobs' as const, value: Infinity },
        ],
        AT,
      ),
    ).rejects.toThrow(InvalidMetric);

    expect(write).not.toHaveBeenCalled();
  });

  it('on Lambda, is part of the plane only where the function’s entry passes it, so other bundles leave it out', () => {
    // The plane's type has no `metrics` without one (a handler whose steps publish does not compile); at run time the
    // part says why.
    const without = awsControlPlane() as Partial<Pick<ControlPlane, 'metrics'>>;
    expect(() => without.metrics).toThrow('this function was built without a metric publisher');
    const publisher = stdoutMetricPublisher();
    expect(awsControlPlane({ metrics: () => publisher }).metrics).toBe(publisher);
  });

  it('on Lambda, writes the lines to standard output itself, past the runtime’s console', async () => {
    const stdout = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    const log = vi.spyOn(console, 'log');

    await stdoutMetricPublisher().publish(
      [{ metric: 'SpotInterruptions', value: 1, dimensions: { Tier: 'gpu-small' } }],
      AT,
    );

    expect(log).not.toHaveBeenCalled();
    expect(stdout).toHaveBeenCalledTimes(1);
    const [values] = extractMetrics(String(stdout.mock.calls[0]?.[0]).split('\n'));
    expect(values).toEqual({
      namespace: 'Trainyard',
      metric: 'SpotInterruptions',
      unit: 'Count',
      dimensions: { Tier: 'gpu-small' },
      value: 1,
      timestampMs: AT,
    });
  });
});
