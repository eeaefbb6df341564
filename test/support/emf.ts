/**
 * Reads embedded metric format lines as CloudWatch Logs would (AWS "Specification: Embedded metric format"): each
 * line one JSON object with `_aws.Timestamp` and `_aws.CloudWatchMetrics`, every metric a numeric top-level member and
 * every dimension a string one. A line that breaks the specification fails the test that reads it.
 */
import { expect } from 'vitest';

/** One metric value as CloudWatch would store it. */
export interface ExtractedMetric {
  readonly namespace: string;
  readonly metric: string;
  readonly unit: string | undefined;
  readonly dimensions: Record<string, string>;
  readonly value: number;
  readonly timestampMs: number;
}

/** The metric values in EMF `lines` (blank lines skipped); asserts each document meets the specification. */
export function extractMetrics(lines: readonly string[]): ExtractedMetric[] {
  const values: ExtractedMetric[] = [];
  for (const line of lines) {
    if (line.trim() === '') continue;
    expect(line.includes('\n'), 'one document per line').toBe(false);
    const doc = JSON.parse(line) as Record<string, unknown> & {
      _aws: {
        Timestamp: unknown;
        CloudWatchMetrics: Array<{
          Namespace: unknown;
          Dimensions: unknown[][];
          Metrics: Array<{ Name: unknown; Unit?: unknown }>;
        }>;
      };
    };
    expect(Number.isInteger(doc._aws?.Timestamp), `Timestamp in ${line}`).toBe(true);
    expect(Array.isArray(doc._aws.CloudWatchMetrics)).toBe(true);
    for (const directive of doc._aws.CloudWatchMetrics) {
      expect(typeof directive.Namespace).toBe('string');
      expect(directive.Metrics.length).toBeGreaterThan(0);
      expect(directive.Metrics.length).toBeLessThanOrEqual(100);
      for (const dimensionSet of directive.Dimensions) {
        expect(dimensionSet.length).toBeLessThanOrEqual(30);
        const dimensions: Record<string, string> = {};
        for (const name of dimensionSet) {
          expect(typeof doc[name as string], `dimension ${name} is a string member`).toBe('string');
          dimensions[name as string] = doc[name as string] as string;
        }
        for (const metric of directive.Metrics) {
          const value = doc[metric.Name as string];
          expect(typeof value, `metric ${metric.Name} is a numeric member`).toBe('number');
          values.push({
            namespace: directive.Namespace as string,
            metric: metric.Name as string,
            unit: metric.Unit as string | undefined,
            dimensions,
            value: value as number,
            timestampMs: doc._aws.Timestamp as number,
          });
        }
      }
    }
  }
  return values;
}
