/**
 * The metric publisher: Trainyard's metrics as embedded metric format lines (domain/platform-metrics.ts). On Lambda
 * the lines go straight to standard output, past the runtime's JSON log wrapper, which CloudWatch Logs reads as EMF
 * (AWS Lambda developer guide, "Publishing custom metrics with the embedded metric format"); local mode appends the
 * same lines to a file, so what a deployment would graph can be read there.
 */
import { appendFile } from 'node:fs/promises';
import { emfDocuments } from '../domain/platform-metrics';
import type { MetricPublisher } from './ports';

/** A publisher that hands each EMF document, as one JSON line ending in a newline, to `write`. */
export function emfMetricPublisher(write: (lines: string) => void | Promise<void>): MetricPublisher {
  return {
    async publish(datums, atMs) {
      const documents = emfDocuments(datums, atMs);
      if (documents.length === 0) return;
      await write(documents.map((d) => `${JSON.stringify(d)}\n`).join(''));
    },
  };
}

/** The Lambda publisher: EMF lines on standard output. */
export function stdoutMetricPublisher(): MetricPublisher {
  return emfMetricPublisher((lines) => {
    process.stdout.write(lines);
  });
}

/** Local mode's publisher: EMF lines appended to `path`. */
export function fileMetricPublisher(path: string): MetricPublisher {
  return emfMetricPublisher((lines) => appendFile(path, lines, 'utf8'));
}
