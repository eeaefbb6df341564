import { describe, expect, it } from 'vitest';
import { type MetricSample, readMetricsLog } from '../../lambdas/domain/metric-samples';

function read(log: string | Uint8Array): { samples: MetricSample[]; count: number; malformedLines: number } {
  const samples: MetricSample[] = [];
  const stats = readMetricsLog(log, (sample) => samples.push(sample));
  return { samples, count: stats.samples, malformedLines: stats.malformedLines };
}

describe('readMetricsLog', () => {
  it.each([
    {
      name: 'a harness sample with a GPU reading and nanoGPT fields',
      line: '{"time": "2026-11-20T09:00:15.000Z", "attempt": 2, "gpu_util": 97.5, "gpu_mem_mib": 14000.0, "step": 120, "loss": 2.4012, "iter_ms": 35.21}',
      sample: { line: 1, timeMs: Date.UTC(2026, 10, 20, 9, 0, 15), attempt: 2, gpuUtil: 97.5, step: 120, loss: 2.4012 },
    },
    {
      name: 'an evaluation line: train and validation loss',
      line: '{"time": "2026-11-20T09:00:00.000Z", "attempt": 1, "step": 250, "train_loss": 1.9876, "val_loss": 2.0123}',
      sample: { line: 1, timeMs: Date.UTC(2026, 10, 20, 9), attempt: 1, step: 250, trainLoss: 1.9876, valLoss: 2.0123 },
    },
    {
      name: 'a NaN loss the harness wrote as null is left out, the rest kept',
      line: '{"time": "2026-11-20T09:00:00.000Z", "attempt": 1, "step": 3, "loss": null}',
      sample: { line: 1, timeMs: Date.UTC(2026, 10, 20, 9), attempt: 1, step: 3 },
    },
    {
      name: "a user script's fields of the wrong type are left out, not the line",
      line: '{"time": "yesterday", "attempt": "2", "step": "7", "loss": "low", "gpu_util": true}',
      sample: { line: 1 },
    },
  ])('reads $name', ({ line, sample }) => {
    const result = read(`${line}\n`);

    expect(result.samples).toEqual([sample]);
    expect(result.malformedLines).toBe(0);
  });

  it('skips and counts lines that are not JSON objects, numbering the others by their line in the file', () => {
    const log = [
      '{"time": "2026-11-20T09:00:00.000Z", "attempt": 1, "step": 1, "loss": 3}',
      '{"time": "2026-11-20T09:00:01.000Z", "att', // torn write
      '',
      '[1, 2]',
      'null',
      '42',
      'iter 2: loss 2.9, time 35ms',
      '  ',
      '{"step": 2, "loss": 2.5}',
    ].join('\n');

    const result = read(log);

    expect(result.malformedLines).toBe(5);
    expect(result.count).toBe(2);
    expect(result.samples.map((s) => [s.line, s.step, s.loss])).toEqual([
      [1, 1, 3],
      [9, 2, 2.5],
    ]);
  });

  it('reads the bytes of the object exactly as its text, including multi-byte characters and CRLF endings', () => {
    const text = '{"step": 1, "loss": 1.5, "note": "ünïcødé ✓"}\r\n{"step": 2, "loss": 1.25}\r\n{broken\r\n';

    const fromText = read(text);
    const fromBytes = read(new TextEncoder().encode(text));

    expect(fromBytes).toEqual(fromText);
    expect(fromText.samples.map((s) => s.loss)).toEqual([1.5, 1.25]);
    expect(fromText.malformedLines).toBe(1);
  });

  it('reads nothing from an empty log', () => {
    expect(read('')).toEqual({ samples: [], count: 0, malformedLines: 0 });
    expect(read(new Uint8Array())).toEqual({ samples: [], count: 0, malformedLines: 0 });
  });
});
