/**
 * Reads the harness's `metrics/metrics.jsonl` (images/harness/trainyard_harness/metrics.py, `MetricsRecorder`): one
 * JSON object per line, `{"time", "attempt", …}` plus whatever the harness parsed (`step`, `loss`, `train_loss`,
 * `val_loss`, …) and, where nvidia-smi exists, `gpu_util` (mean %, the latest reading: the harness copies it into every
 * later sample of the attempt) and `gpu_mem_mib`. Non-finite numbers arrive as `null`. A user script's own metrics file
 * is copied line by line, so any field may be missing or of another type; such a field is left out here, not the line.
 * Pure: the caller reads the object and passes its text or bytes.
 */

/** One sample, the fields the control plane reads; each present only when the line holds it as a finite number. */
export interface MetricSample {
  /** 1-based line number in the file. */
  readonly line: number;
  /** The sample's `time` (ISO-8601) as epoch ms. */
  readonly timeMs?: number;
  readonly attempt?: number;
  readonly step?: number;
  readonly loss?: number;
  readonly trainLoss?: number;
  readonly valLoss?: number;
  /** Mean GPU utilisation, percent. */
  readonly gpuUtil?: number;
}

/** What a pass over the file found. */
export interface MetricsLogStats {
  /** Lines that held a JSON object (each was passed to the visitor). */
  readonly samples: number;
  /** Non-blank lines that are not a JSON object (torn writes, a user script's stray output); skipped. */
  readonly malformedLines: number;
}

const LF = 0x0a;

function finite(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

function sampleOf(line: number, document: Record<string, unknown>): MetricSample {
  const sample: {
    line: number;
    timeMs?: number;
    attempt?: number;
    step?: number;
    loss?: number;
    trainLoss?: number;
    valLoss?: number;
    gpuUtil?: number;
  } = { line };
  if (typeof document.time === 'string') {
    const ms = Date.parse(document.time);
    if (!Number.isNaN(ms)) sample.timeMs = ms;
  }
  const fields = [
    ['attempt', document.attempt],
    ['step', document.step],
    ['loss', document.loss],
    ['trainLoss', document.train_loss],
    ['valLoss', document.val_loss],
    ['gpuUtil', document.gpu_util],
  ] as const;
  for (const [name, raw] of fields) {
    const value = finite(raw);
    if (value !== undefined) sample[name] = value;
  }
  return sample;
}

function* linesOf(log: string | Uint8Array): Generator<string> {
  if (typeof log === 'string') {
    for (let start = 0; start < log.length; ) {
      const newline = log.indexOf('\n', start);
      const end = newline === -1 ? log.length : newline;
      yield log.slice(start, end);
      start = end + 1;
    }
    return;
  }
  const decoder = new TextDecoder();
  for (let start = 0; start < log.length; ) {
    const newline = log.indexOf(LF, start);
    const end = newline === -1 ? log.length : newline;
    yield decoder.decode(log.subarray(start, end));
    start = end + 1;
  }
}

/**
 * Calls `visit` with every sample of a metrics.jsonl, in file order, and counts the lines that are not JSON objects.
 * Takes the object's bytes as well as its text, so a large file is decoded a line at a time, never as one string.
 */
export function readMetricsLog(log: string | Uint8Array, visit: (sample: MetricSample) => void): MetricsLogStats {
  let samples = 0;
  let malformedLines = 0;
  let line = 0;
  for (const text of linesOf(log)) {
    line += 1;
    if (text.trim() === '') continue;
    let document: unknown;
    try {
      document = JSON.parse(text);
    } catch {
      malformedLines += 1;
      continue;
    }
    if (typeof document !== 'object' || document === null || Array.isArray(document)) {
      malformedLines += 1;
      continue;
    }
    samples += 1;
    visit(sampleOf(line, document as Record<string, unknown>));
  }
  return { samples, malformedLines };
}
