// Finalize writing the job report, against dynalite (jobs, budgets) and s3rver (workspace) behind the real adapters.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HeadObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AttemptRecord } from '../../lambdas/domain/job';
import { jobKeysFor } from '../../lambdas/domain/workspace-layout';
import { lastSignOf } from '../../lambdas/lifecycle/common';
import { createFinalizeHandler } from '../../lambdas/lifecycle/finalize';
import { MAX_REPORT_METRICS_BYTES } from '../../lambdas/shared/job-files';
import type { JobStore } from '../../lambdas/shared/job-store';
import { Workspace } from '../../lambdas/shared/workspace';
import { localS3Client } from '../../lib/local/control-plane';
import { type RunningEngine, startS3rver } from '../../lib/local/engines';
import {
  attemptRecord,
  CONFIG,
  type EventBench,
  JOB_ID,
  jobRecord,
  publishedOf,
  startEventBench,
  T,
} from '../lambdas/event-bench';

const BUCKET = 'trainyard-workspace';
const NOW = new Date(T.stopped + 60_000);
const KEYS = jobKeysFor('vision', JOB_ID);

let bench: EventBench;
let s3rver: RunningEngine;
let s3: S3Client;
let directory: string;
let workspace: Workspace;
let finalize: ReturnType<typeof createFinalizeHandler>;

beforeEach(async () => {
  bench = await startEventBench({ now: NOW });
  directory = mkdtempSync(join(tmpdir(), 'trainyard-finalize-s3-'));
  s3rver = await startS3rver({ directory, buckets: [BUCKET] });
  s3 = localS3Client(s3rver.endpoint);
  workspace = new Workspace(s3, BUCKET);
  finalize = createFinalizeHandler({
    config: CONFIG,
    jobs: bench.jobs,
    ledger: bench.ledger,
    workspace,
    events: bench.ports.events,
    batch: bench.ports.batch,
    metrics: bench.ports.metrics,
    fleet: bench.ports.fleet,
    clock: () => NOW,
  });
});

afterEach(async () => {
  s3.destroy();
  await s3rver.stop();
  rmSync(directory, { recursive: true, force: true });
  await bench.stop();
});

// A reclaimed spot attempt then an on-demand one that succeeds (fixture times; costs as batch-events records them).
const ATTEMPTS: AttemptRecord[] = [
  attemptRecord({
    attempt: 1,
    status: 'FAILED',
    startedAt: T.started - 3_600_000,
    stoppedAt: T.started - 1_800_000,
    usdPerHour: 0.19,
    costUsd: 0.095,
    outcome: { kind: 'reclaimed', reason: 'Host EC2 (instance i-0f2b6a4c9d8e7f123) terminated.', resumable: true },
  }),
  attemptRecord({
    attempt: 2,
    capacity: 'on-demand',
    queue: 'trainyard-gpu-small-on-demand',
    status: 'SUCCEEDED',
    startedAt: T.started,
    stoppedAt: T.stopped,
    usdPerHour: 0.526,
    costUsd: 0.351,
    outcome: { kind: 'succeeded', reason: 'Essential container in task exited', exitCode: 0, resumable: false },
  }),
];

async function seed(metricsLog?: string | Buffer): Promise<void> {
  await bench.jobs.createJob(
    jobRecord({
      createdAt: new Date(T.started - 4_000_000).toISOString(),
      project: '<script>x</script>',
      labels: { sweep: 'lr-grid' },
    }),
  );
  for (const a of ATTEMPTS) await bench.jobs.putAttempt(a);
  if (metricsLog !== undefined) await workspace.put(KEYS.metricsLog, metricsLog);
}

function line(msAfterStart: number, fields: Record<string, unknown>): string {
  return JSON.stringify({ time: new Date(T.started + msAfterStart).toISOString(), attempt: 2, ...fields });
}

async function report(): Promise<string> {
  return (await workspace.get(KEYS.report))?.toString('utf8') ?? '';
}

describe('Finalize: the job report', () => {
  it('writes report.html beside summary.json as HTML, and announces it as the report', async () => {
    await seed([line(1000, { step: 10, loss: 2.5, gpu_util: 97 }), line(61_000, { step: 20, loss: 2.1 })].join('\n'));

    const output = await finalize({ jobId: JOB_ID, finalState: 'SUCCEEDED' });

    const reportUri = `s3://${BUCKET}/teams/vision/jobs/${JOB_ID}/report.html`;
    expect(output).toMatchObject({
      state: 'SUCCEEDED',
      costUsd: 0.45,
      summaryUri: `s3://${BUCKET}/teams/vision/jobs/${JOB_ID}/summary.json`,
      reportUri,
    });
    const head = await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: KEYS.report }));
    expect(head.ContentType).toBe('text/html; charset=utf-8');
    expect(await workspace.get(KEYS.summary)).toBeDefined();
    const [succeeded] = publishedOf(bench.recorded, 'Job Succeeded');
    expect(succeeded?.reportUri).toBe(reportUri);
    // The job's labels travel with its events, so a rule can follow a sweep.
    expect(succeeded?.labels).toEqual({ sweep: 'lr-grid' });

    const html = await report();
    expect(html).toMatch(/^<!doctype html>/);
    expect(html).toContain('<span class="state state-succeeded">SUCCEEDED</span>');
    expect(html).toContain('&#60;script&#62;x&#60;/script&#62;');
    expect(html).not.toContain('<script>');
    expect(html).toContain('<dt>Total cost</dt><dd>$0.45</dd>');
    expect(html).toContain('<g class="marker reclaim" data-outcome="reclaimed" data-attempt="1">');
    expect(html).toContain('id="plot-loss"');
    expect(html).toContain('id="plot-gpu"');
    expect(html).toContain('metrics.jsonl: 2 samples, <span id="malformed-lines">0</span> malformed line(s) skipped');
  });

  it('skips malformed metrics lines, counting them in the report, and still finalizes', async () => {
    await seed(
      [line(1000, { step: 10, loss: 2.5 }), '{"time": "2026-', 'Killed', line(2000, { step: 20, loss: 2 })].join('\n'),
    );

    const output = await finalize({ jobId: JOB_ID, finalState: 'SUCCEEDED' });

    expect(output.state).toBe('SUCCEEDED');
    expect((await bench.jobs.requireJob(JOB_ID)).state).toBe('SUCCEEDED');
    expect(await report()).toContain(
      'metrics.jsonl: 2 samples, <span id="malformed-lines">2</span> malformed line(s) skipped',
    );
  });

  it('renders the report without samples when the harness wrote no metrics.jsonl', async () => {
    await seed();

    await finalize({ jobId: JOB_ID, finalState: 'SUCCEEDED' });

    const html = await report();
    expect(html).toContain('no metrics.jsonl was written');
    expect(html).toContain('id="no-loss"');
    expect(html).toContain('id="no-gpu"');
    expect(html).toContain('id="plot-cost"');
  });

  it('leaves the samples out, saying why, when metrics.jsonl is larger than a report reads', async () => {
    const filler = `${line(1000, { step: 1, loss: 1 })}\n`;
    await seed(Buffer.alloc(MAX_REPORT_METRICS_BYTES + 1, filler));

    const output = await finalize({ jobId: JOB_ID, finalState: 'SUCCEEDED' });

    expect(output.state).toBe('SUCCEEDED');
    expect(await report()).toContain(
      `metrics.jsonl not read: it holds ${MAX_REPORT_METRICS_BYTES + 1} bytes (64.0 MiB), more than the 64.0 MiB a report reads`,
    );
  });

  it('writes the same report again when Step Functions replays the step', async () => {
    await seed(line(1000, { step: 10, loss: 2.5 }));
    await finalize({ jobId: JOB_ID, finalState: 'SUCCEEDED' });
    const first = await report();

    const again = await finalize({ jobId: JOB_ID, finalState: 'SUCCEEDED' });

    expect(again.state).toBe('SUCCEEDED');
    expect(await report()).toBe(first);
  });

  it('reports a failed job with its reason', async () => {
    await seed();

    await finalize({ jobId: JOB_ID, finalState: 'FAILED', reason: 'the training command exited 1 <twice>' });

    const html = await report();
    expect(html).toContain('<span class="state state-failed">FAILED</span>');
    expect(html).toContain('<dt>Reason</dt><dd>the training command exited 1 &#60;twice&#62;</dd>');
  });

  it('sends the alert for a threshold the final cost crosses, which the running cost had not', async () => {
    await seed();
    const period = new Date(T.started - 4_000_000).toISOString().slice(0, 7);
    // $0.10 reserved of $0.50 (20 %); the attempts cost $0.095 + $0.351, settled to the cent as $0.45 (90 %): past warn
    // (70 %), short of block.
    await bench.ledger.ensureBudget('team:vision', period, 0.5);
    await bench.ledger.reserve(JOB_ID, ['team:vision'], 0.1, period);

    await finalize({ jobId: JOB_ID, finalState: 'SUCCEEDED' });

    expect(publishedOf(bench.recorded, 'Budget Threshold Crossed')).toEqual([
      expect.objectContaining({
        eventId: `budget/team:vision/${period}/threshold/70`,
        scope: 'team:vision',
        thresholdPercent: 70,
        limitUsd: 0.5,
        spentUsd: 0.45,
        reservedUsd: 0,
        occurredAt: NOW.toISOString(),
      }),
    ]);
    expect((await bench.ledger.unpublishedAlerts('vision', period)).crossings).toEqual([]);
  });

  it('sends a crossing’s alert once when Finalize runs again after sending it (a retry after a later failure)', async () => {
    await seed();
    const period = new Date(T.started - 4_000_000).toISOString().slice(0, 7);
    await bench.ledger.ensureBudget('team:vision', period, 0.5);
    await bench.ledger.reserve(JOB_ID, ['team:vision'], 0.1, period);

    await finalize({ jobId: JOB_ID, finalState: 'SUCCEEDED' });
    // The settlement replayed reports its crossing again; its marker says it is out.
    await finalize({ jobId: JOB_ID, finalState: 'SUCCEEDED' });

    expect(publishedOf(bench.recorded, 'Budget Threshold Crossed').map((e) => e.eventId)).toEqual([
      `budget/team:vision/${period}/threshold/70`,
    ]);
  });

  it('settles a job whose attempts cost $0.00 to $0.00, not to what budget-watch had accrued for it', async () => {
    await bench.jobs.createJob(jobRecord({ createdAt: new Date(T.started - 4_000_000).toISOString() }));
    // One minute on a tier priced at $0.18/h: $0.003, nothing to the cent.
    await bench.jobs.putAttempt(
      attemptRecord({
        attempt: 1,
        status: 'SUCCEEDED',
        startedAt: T.started,
        stoppedAt: T.started + 60_000,
        usdPerHour: 0.18,
        costUsd: 0.003,
        outcome: { kind: 'succeeded', reason: 'Essential container in task exited', exitCode: 0, resumable: false },
      }),
    );
    const period = new Date(T.started - 4_000_000).toISOString().slice(0, 7);
    await bench.ledger.ensureBudget('team:vision', period, 10);
    await bench.ledger.reserve(JOB_ID, ['team:vision'], 1, period);
    await bench.ledger.accrue(JOB_ID, 0.01); // budget-watch's running figure, a tick before the end

    await finalize({ jobId: JOB_ID, finalState: 'SUCCEEDED' });

    expect(await bench.ledger.usage('team:vision', period)).toMatchObject({ spentUsd: 0, reservedUsd: 0 });
    await bench.ledger.accrue(JOB_ID, 0.02); // a tick that read the job before it ended changes nothing now
    expect(await bench.ledger.usage('team:vision', period)).toMatchObject({ spentUsd: 0, reservedUsd: 0 });
  });
});

describe('Finalize: an orphaned Batch job’s cost', () => {
  // An orphan of attempt 1 (a second Batch job that ran under its name) and what batch-events records for it.
  const ORPHAN = { capacity: 'spot', startedAt: T.started - 1_700_000, stoppedAt: T.started - 1_000_000 } as const;
  const ORPHAN_RUN = { ...ORPHAN, usdPerHour: 0.19, costUsd: 0.04 };

  /** Finalize, with batch-events recording the orphan `batchJobId` right after Finalize's `read`-th attempts read. */
  function finalizeRacedAtRead(read: number, batchJobId: string) {
    const jobs = Object.create(bench.jobs) as JobStore;
    let reads = 0;
    jobs.listAttempts = async (jobId) => {
      const attempts = await bench.jobs.listAttempts(jobId);
      reads += 1;
      if (reads === read) await bench.jobs.recordOrphanRun(JOB_ID, 1, batchJobId, ORPHAN_RUN);
      return attempts;
    };
    const { events, batch } = bench.ports;
    return createFinalizeHandler({
      config: CONFIG,
      jobs,
      ledger: bench.ledger,
      workspace,
      events,
      batch,
      metrics: bench.ports.metrics,
      fleet: bench.ports.fleet,
      clock: () => NOW,
    });
  }

  it('charges an orphan recorded while it settled to the ledger, the job, the summary, the report and the event', async () => {
    await seed();
    const period = new Date(T.started - 4_000_000).toISOString().slice(0, 7);
    await bench.ledger.ensureBudget('team:vision', period, 10);
    await bench.ledger.reserve(JOB_ID, ['team:vision'], 1, period);
    // batch-events records an orphan of attempt 1 right after Finalize's first read of the attempts.
    const raced = finalizeRacedAtRead(1, 'orphan-b1');

    const output = await raced({ jobId: JOB_ID, finalState: 'SUCCEEDED' });

    // Settled first to $0.095 + $0.351 = $0.446, $0.45; with the orphan's $0.04, $0.486 is $0.49.
    expect(output.costUsd).toBe(0.49);
    expect(await bench.ledger.usage('team:vision', period)).toMatchObject({ spentUsd: 0.49, reservedUsd: 0 });
    expect(await bench.jobs.requireJob(JOB_ID)).toMatchObject({ state: 'SUCCEEDED', costSoFarUsd: 0.49 });
    expect(publishedOf(bench.recorded, 'Job Succeeded')).toEqual([expect.objectContaining({ costUsd: 0.49 })]);
    const summary = JSON.parse((await workspace.get(KEYS.summary))?.toString('utf8') ?? '{}');
    expect(summary.costUsd).toBe(0.49);
    expect(summary.attempts[0].orphans).toEqual({ 'orphan-b1': ORPHAN_RUN });
    const html = await report();
    expect(html).toContain('<tr class="orphan"><td>1</td><td>spot</td>');
    expect(html).toContain('orphan-b1');

    // A replay changes nothing in the ledger.
    const ledgerAfter = (await bench.snapshot()).budgets;
    await raced({ jobId: JOB_ID, finalState: 'SUCCEEDED' });
    expect((await bench.snapshot()).budgets).toEqual(ledgerAfter);
  });

  it('writes its files again when an orphan is recorded after it read the attempts it writes them from', async () => {
    await seed();
    // batch-events records an orphan of attempt 1 right after Finalize's second read (the one the files come from),
    // and charges the ledger itself, finding it settled; here only what Finalize writes is looked at.
    const raced = finalizeRacedAtRead(2, 'orphan-b3');

    const output = await raced({ jobId: JOB_ID, finalState: 'SUCCEEDED' });

    // Written first at $0.45 without the orphan, then again at $0.49 with it.
    expect(output.costUsd).toBe(0.49);
    expect(await bench.jobs.requireJob(JOB_ID)).toMatchObject({ state: 'SUCCEEDED', costSoFarUsd: 0.49 });
    expect(publishedOf(bench.recorded, 'Job Succeeded')).toEqual([expect.objectContaining({ costUsd: 0.49 })]);
    const summary = JSON.parse((await workspace.get(KEYS.summary))?.toString('utf8') ?? '{}');
    expect(summary).toMatchObject({ costUsd: 0.49, job: { costSoFarUsd: 0.49 } });
    expect(summary.attempts[0].orphans).toEqual({ 'orphan-b3': ORPHAN_RUN });
    const html = await report();
    expect(html).toContain('<dt>Total cost</dt><dd>$0.49</dd>');
    expect(html).toContain('orphan-b3');
  });

  it('charges, in a replay, an orphan recorded after a first run settled the ledger and failed', async () => {
    await seed();
    const period = new Date(T.started - 4_000_000).toISOString().slice(0, 7);
    await bench.ledger.ensureBudget('team:vision', period, 10);
    await bench.ledger.reserve(JOB_ID, ['team:vision'], 1, period);
    // The first run settled $0.45 and failed before its state change; an orphan's $0.04 is recorded; then the replay.
    await bench.ledger.settle(JOB_ID, 0.45);
    await bench.jobs.recordOrphanRun(JOB_ID, 1, 'orphan-b2', ORPHAN_RUN);

    const output = await finalize({ jobId: JOB_ID, finalState: 'SUCCEEDED' });

    // The settlement stands at its first amount, $0.45; the late charge brings the ledger to the job's $0.49.
    expect(output.costUsd).toBe(0.49);
    expect(await bench.ledger.usage('team:vision', period)).toMatchObject({ spentUsd: 0.49, reservedUsd: 0 });
    expect(await bench.jobs.requireJob(JOB_ID)).toMatchObject({ state: 'SUCCEEDED', costSoFarUsd: 0.49 });
  });
});

describe('lastSignOf (an attempt whose Batch job Batch no longer reports)', () => {
  const job = { jobId: JOB_ID, team: 'vision' };
  const report = (attempt: number, at: number) =>
    workspace.put(
      KEYS.progress,
      JSON.stringify({ job_id: JOB_ID, attempt, step: 10, updated_at: new Date(at).toISOString() }),
    );
  const REPORT = "the harness's last progress report";
  const NOTICE = 'its spot interruption notice';

  it.each([
    {
      what: 'the report, later than the notice',
      reported: 2,
      notice: T.started + 1_000,
      sign: { at: T.stopped, what: REPORT },
    },
    {
      what: 'the notice, later than the report',
      reported: 2,
      notice: T.stopped + 1_000,
      sign: { at: T.stopped + 1_000, what: NOTICE },
    },
    {
      what: 'the notice, when the report is a later attempt’s',
      reported: 3,
      notice: T.started + 1_000,
      sign: { at: T.started + 1_000, what: NOTICE },
    },
    { what: 'the report, without a notice', reported: 2, notice: undefined, sign: { at: T.stopped, what: REPORT } },
    { what: 'nothing, without either', reported: undefined, notice: undefined, sign: undefined },
  ])('is $what', async ({ reported, notice, sign }) => {
    if (reported !== undefined) await report(reported, T.stopped);
    expect(await lastSignOf({ workspace }, job, { attempt: 2, noticeAt: notice })).toEqual(sign);
  });
});
