/**
 * Checkpoint-on-interruption benchmark: for checkpoints of 10 MB, 100 MB and 1.5 GB, the time from a spot notice to
 * a complete checkpoint (manifest written) in S3, measured through the real harness against s3rver, compared with
 * the 120 s spot warning; and a 10 MB save beside 1.5 GB (quick: 100 MB) the trainer never changes, which the final
 * checkpoint copies within the store instead of uploading. Run standalone with `npx tsx bench/checkpoint.ts [--quick]`.
 */

import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startS3rver } from '../lib/local/engines';
import { median } from './stats';

const HERE = dirname(fileURLToPath(import.meta.url));
const PYTHON = '/usr/bin/python3';
const BUCKET = 'trainyard-bench';
/** The spot interruption warning: everything must be in storage within it. */
export const SPOT_WARNING_SECONDS = 120;
const MB = 1000 * 1000;
/** Checkpoint sizes the full run measures; quick mode keeps the first two. */
export const CHECKPOINT_SIZES = [10 * MB, 100 * MB, 1500 * MB] as const;
/** A 10 MB save beside files it does not change, of this size (full run; quick mode: the second). */
export const UNCHANGED_SIZES = [1500 * MB, 100 * MB] as const;

/** One case: a save of `bytes`, beside `unchangedBytes` already in storage (0: none). */
interface CheckpointCase {
  readonly bytes: number;
  readonly unchangedBytes: number;
}

/** Median seconds spent in each phase between notice and complete checkpoint. */
export interface CheckpointPhases {
  /** Notice served by IMDS until the harness saw it (bounded by the 5 s poll interval). */
  readonly detectSeconds: number;
  /** Harness saw the notice until it signalled the training process. */
  readonly signalSeconds: number;
  /** Signal until the training process had written its checkpoint and exited. */
  readonly childSaveSeconds: number;
  /** Upload of the checkpoint files and the manifest. */
  readonly uploadSeconds: number;
}

/** Result for one checkpoint size. */
export interface CheckpointSizeResult {
  readonly bytes: number;
  /** Bytes beside the save that it did not change (already in storage: copied there, not uploaded). */
  readonly unchangedBytes: number;
  /** Median bytes the final checkpoint copied within the store. */
  readonly copiedBytes: number;
  readonly runs: number;
  /** Median over runs of notice served to harness exit (manifest written, checkpoint complete). */
  readonly noticeToCompleteSeconds: number;
  readonly maxNoticeToCompleteSeconds: number;
  readonly phases: CheckpointPhases;
  /** Whether the median fits inside the 120 s spot warning. */
  readonly withinWindow: boolean;
}

/** Whole benchmark result. */
export interface CheckpointBenchResult {
  readonly name: 'checkpoint-on-interruption';
  readonly quick: boolean;
  readonly windowSeconds: number;
  readonly imdsPollSeconds: number;
  readonly sizes: readonly CheckpointSizeResult[];
}

interface PythonRun {
  bytes: number;
  unchanged_bytes: number;
  copied_bytes: number;
  notice_to_complete_s: number;
  phases: { detect_s: number; signal_s: number; child_save_s: number; upload_s: number };
}

function runPython(args: string[], log: (line: string) => void): Promise<PythonRun[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, [join(HERE, 'checkpoint', 'notice_to_checkpoint.py'), ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const runs: PythonRun[] = [];
    let stderr = '';
    createInterface({ input: child.stdout }).on('line', (line) => {
      const run = JSON.parse(line) as PythonRun;
      runs.push(run);
      log(
        `checkpoint ${caseName(run.bytes, run.unchanged_bytes)}: notice to complete ${run.notice_to_complete_s.toFixed(2)} s`,
      );
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolve(runs);
      else reject(new Error(`checkpoint benchmark script exited ${code}:\n${stderr.slice(-4000)}`));
    });
  });
}

/** Runs the benchmark: starts s3rver, drives the Python harness runs, aggregates medians per size. */
export async function runCheckpointBench(options: {
  quick: boolean;
  log: (line: string) => void;
}): Promise<CheckpointBenchResult> {
  const cases: CheckpointCase[] = [
    ...(options.quick ? CHECKPOINT_SIZES.slice(0, 2) : [...CHECKPOINT_SIZES]).map((bytes) => ({
      bytes,
      unchangedBytes: 0,
    })),
    { bytes: 10 * MB, unchangedBytes: options.quick ? UNCHANGED_SIZES[1] : UNCHANGED_SIZES[0] },
  ];
  const runsPerSize = options.quick ? 1 : 3;
  const imdsPollSeconds = 5;
  const directory = await mkdtemp(join(tmpdir(), 'trainyard-bench-s3-'));
  const s3 = await startS3rver({ directory, buckets: [BUCKET] });
  try {
    const args = ['--endpoint', s3.endpoint, '--bucket', BUCKET, '--runs', String(runsPerSize)];
    args.push('--poll-seconds', String(imdsPollSeconds));
    for (const c of cases) args.push('--size', c.unchangedBytes ? `${c.bytes}+${c.unchangedBytes}` : String(c.bytes));
    const names = cases.map((c) => caseName(c.bytes, c.unchangedBytes));
    options.log(`checkpoint bench: ${names.join(', ')}, ${runsPerSize} run(s) each`);
    const runs = await runPython(args, options.log);
    const results = cases.map(({ bytes, unchangedBytes }): CheckpointSizeResult => {
      const mine = runs.filter((run) => run.bytes === bytes && run.unchanged_bytes === unchangedBytes);
      const total = mine.map((run) => run.notice_to_complete_s);
      const noticeToCompleteSeconds = median(total);
      return {
        bytes,
        unchangedBytes,
        copiedBytes: median(mine.map((run) => run.copied_bytes)),
        runs: mine.length,
        noticeToCompleteSeconds,
        maxNoticeToCompleteSeconds: Math.max(...total),
        phases: {
          detectSeconds: median(mine.map((run) => run.phases.detect_s)),
          signalSeconds: median(mine.map((run) => run.phases.signal_s)),
          childSaveSeconds: median(mine.map((run) => run.phases.child_save_s)),
          uploadSeconds: median(mine.map((run) => run.phases.upload_s)),
        },
        withinWindow: noticeToCompleteSeconds <= SPOT_WARNING_SECONDS,
      };
    });
    return {
      name: 'checkpoint-on-interruption',
      quick: options.quick,
      windowSeconds: SPOT_WARNING_SECONDS,
      imdsPollSeconds,
      sizes: results,
    };
  } finally {
    await s3.stop();
    await rm(directory, { recursive: true, force: true });
  }
}

function formatBytes(bytes: number): string {
  return bytes >= 1000 * MB ? `${bytes / (1000 * MB)} GB` : `${bytes / MB} MB`;
}

/** `10 MB`, or `10 MB + 1.5 GB unchanged`. */
export function caseName(bytes: number, unchangedBytes: number): string {
  return unchangedBytes ? `${formatBytes(bytes)} + ${formatBytes(unchangedBytes)} unchanged` : formatBytes(bytes);
}

/** Markdown table of a result. */
export function checkpointBenchTable(result: CheckpointBenchResult): string {
  const lines = [
    '| checkpoint | runs | notice → complete (median) | max | detect | signal | child save | upload | copied in store | within 120 s |',
    '|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const size of result.sizes) {
    const p = size.phases;
    const cells = [
      caseName(size.bytes, size.unchangedBytes),
      String(size.runs),
      `${size.noticeToCompleteSeconds.toFixed(2)} s`,
      `${size.maxNoticeToCompleteSeconds.toFixed(2)} s`,
      `${p.detectSeconds.toFixed(2)} s`,
      `${p.signalSeconds.toFixed(3)} s`,
      `${p.childSaveSeconds.toFixed(2)} s`,
      `${p.uploadSeconds.toFixed(2)} s`,
      size.copiedBytes ? formatBytes(size.copiedBytes) : '—',
      size.withinWindow ? 'yes' : 'no',
    ];
    lines.push(`| ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const quick = process.argv.includes('--quick');
  runCheckpointBench({ quick, log: (line) => console.error(line) })
    .then((result) => {
      console.log(checkpointBenchTable(result));
    })
    .catch((error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    });
}
