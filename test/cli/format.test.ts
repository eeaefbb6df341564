// Human output, table-driven: money, durations, the progress bar, the watch line and how a GET /jobs/{id} answer is
// read (the expected strings are written out by hand from the formatting rules in lib/cli/format.ts's JSDoc).
import { describe, expect, it } from 'vitest';
import { newLines, progressLine } from '../../lib/cli/commands';
import {
  estimateCostForConfirmation,
  formatBudgets,
  formatDuration,
  formatJobStatus,
  formatJobsTable,
  formatMoney,
  formatRate,
  formatSweepPlan,
  jobView,
  logLinesOf,
  progressBar,
  statusLine,
} from '../../lib/cli/format';

describe('formatMoney', () => {
  it.each([
    [0, '$0.00'],
    [0.0042, '$0.0042'],
    [0.00049, '$0.00049'],
    [0.005, '$0.01'],
    [0.526, '$0.53'],
    [1, '$1.00'],
    [12.5, '$12.50'],
    [999.999, '$1,000.00'],
    [1234.56, '$1,234.56'],
    [1234567.891, '$1,234,567.89'],
    [-3, '-$3.00'],
    [Number.NaN, '—'],
  ])('%s → %s', (usd, text) => {
    expect(formatMoney(usd)).toBe(text);
  });
});

describe('formatRate', () => {
  it.each([
    [0.526, '$0.526'],
    [0.025, '$0.025'],
    [1.5, '$1.5'],
    [0.00813, '$0.0081'],
    [5.672, '$5.672'],
  ])('%s → %s', (usd, text) => {
    expect(formatRate(usd)).toBe(text);
  });
});

describe('formatDuration', () => {
  it.each([
    [0, '0s'],
    [45, '45s'],
    [59.6, '1m 00s'],
    [60, '1m 00s'],
    [725, '12m 05s'],
    [3599, '59m 59s'],
    [3600, '1h 00m'],
    [11_040, '3h 04m'],
    [86_400, '1d 00h'],
    [183_600, '2d 03h'],
    [-1, '—'],
  ])('%s s → %s', (seconds, text) => {
    expect(formatDuration(seconds)).toBe(text);
  });
});

describe('progressBar', () => {
  it.each([
    [0, 10, '[----------]   0%'],
    [0.05, 10, '[----------]   5%'],
    [0.1, 10, '[#---------]  10%'],
    [0.5, 20, '[##########----------]  50%'],
    [0.999, 10, '[#########-]  99%'],
    [1, 10, '[##########] 100%'],
    [1.7, 10, '[##########] 100%'],
    [-0.2, 10, '[----------]   0%'],
    [Number.NaN, 4, '[----]   0%'],
  ])('%s at width %s → %s', (fraction, width, text) => {
    expect(progressBar(fraction, width)).toBe(text);
  });
});

describe('jobView and statusLine read the GET /jobs/{id} answer', () => {
  const running = {
    job: { jobId: 'j1', state: 'RUNNING', tier: 'gpu-small', counters: { attempts: 1 }, costSoFarUsd: 0 },
    attempts: [
      { attempt: 1, capacity: 'spot', status: 'FAILED' },
      { attempt: 2, capacity: 'on-demand', status: 'RUNNING' },
    ],
    decisions: [],
    progress: { step: 2600, totalSteps: 5000, fraction: 0.52, loss: 1.23456, updatedAt: '2026-03-15T12:00:00.000Z' },
    forecast: {
      available: true,
      forecast: {
        etaSeconds: { value: 750, basis: 'b', confidence: 'medium' },
        projectedTotalUsd: 0.31,
        fractionDone: 0.52,
      },
    },
    costSoFarUsd: 0.1234,
  };

  it('takes step, loss, ETA, cost and the newest attempt from their places', () => {
    expect(jobView(running)).toEqual({
      jobId: 'j1',
      state: 'RUNNING',
      tier: 'gpu-small',
      attempts: 2,
      capacity: 'on-demand',
      step: 2600,
      totalSteps: 5000,
      fraction: 0.52,
      loss: 1.23456,
      etaSeconds: 750,
      costSoFarUsd: 0.1234,
      projectedTotalUsd: 0.31,
      reason: undefined,
    });
    expect(statusLine(jobView(running))).toBe(
      'RUNNING        [##########----------]  52%  step 2600/5000  loss 1.235  ETA 12m 30s  cost $0.12 → $0.31  attempt 2 (on-demand)',
    );
  });

  it("reads the harness's snake_case progress and an unavailable forecast", () => {
    const view = jobView({
      job: { jobId: 'j2', state: 'RUNNING' },
      attempts: [],
      progress: { step: 30, total_steps: 120 },
      forecast: { available: false, reason: 'fewer than two progress samples' },
      costSoFarUsd: 0,
    });
    expect([view.step, view.totalSteps, view.fraction, view.etaSeconds]).toEqual([30, 120, 0.25, undefined]);
    expect(statusLine(view)).toBe('RUNNING        [#####---------------]  25%  step 30/120  cost $0.00');
  });

  it('lists an orphaned Batch job under the attempt it ran for, with what it cost the job', () => {
    const text = formatJobStatus({
      job: { jobId: 'j4', state: 'RUNNING', tier: 'gpu-small' },
      attempts: [
        {
          attempt: 1,
          capacity: 'spot',
          status: 'FAILED',
          outcome: { kind: 'infra-error' },
          costUsd: 0,
          orphans: {
            'b-7f3a': {
              capacity: 'on-demand',
              startedAt: 1_000_000,
              stoppedAt: 1_725_000,
              usdPerHour: 3.06,
              costUsd: 0.62,
            },
          },
        },
      ],
      costSoFarUsd: 0.62,
    });
    const lines = text.split('\n');
    const attempt = lines.findIndex((line) => line.startsWith('  #1  spot  FAILED  infra-error'));
    expect(attempt).toBeGreaterThan(-1);
    expect(lines[attempt + 1]).toBe(
      '      orphaned Batch job b-7f3a  on-demand  12m 05s  $0.62  (stopped by Trainyard, billed to the job)',
    );
  });

  it('shows only the state when nothing else is known', () => {
    expect(statusLine(jobView({ job: { jobId: 'j3', state: 'SUBMITTED' } }))).toBe('SUBMITTED');
  });
});

describe('estimateCostForConfirmation', () => {
  it.each([
    [{ estimate: { reservationUsd: 2.5, onDemand: { costUsd: 9 } } }, 2.5],
    [{ estimate: { onDemand: { costUsd: 1.2 }, spot: { highUsd: 1.9 } } }, 1.9],
    [{ estimate: { onDemand: { costUsd: 1.2 } } }, 1.2],
    [{ analysis: {} }, undefined],
  ])('%j → %s', (response, usd) => {
    expect(estimateCostForConfirmation(response)).toBe(usd);
  });
});

describe('formatBudgets', () => {
  it('aligns the columns and marks crossed thresholds', () => {
    const text = formatBudgets({
      team: 'nlp',
      period: '2026-03',
      budgets: [
        {
          scope: 'team:nlp',
          period: '2026-03',
          limitUsd: 1000,
          spentUsd: 712.5,
          reservedUsd: 10,
          availableUsd: 277.5,
          percentUsed: 72.25,
          thresholdsCrossed: ['warn'],
          blocked: false,
        },
        {
          scope: 'user:nlp:alice',
          period: '2026-03',
          limitUsd: 50,
          spentUsd: 50,
          reservedUsd: 0,
          availableUsd: 0,
          percentUsed: 100,
          thresholdsCrossed: ['warn', 'block'],
          blocked: true,
        },
      ],
    });
    expect(text.split('\n')).toEqual([
      'SCOPE           PERIOD   LIMIT      SPENT    RESERVED  AVAILABLE  USED    ALERTS',
      'team:nlp        2026-03  $1,000.00  $712.50  $10.00    $277.50    72.3%   warn',
      'user:nlp:alice  2026-03  $50.00     $50.00   $0.00     $0.00      100.0%  warn,block,BLOCKED',
    ]);
  });
});

describe('logs --follow prints each line once', () => {
  const l = (message: string, timestamp?: number) => (timestamp === undefined ? { message } : { timestamp, message });
  it.each([
    ['first fetch prints all', [], [l('a'), l('b')], [l('a'), l('b')]],
    ['a window that moved on prints the tail', [l('a'), l('b'), l('c')], [l('b'), l('c'), l('d')], [l('d')]],
    ['nothing new prints nothing', [l('a'), l('b')], [l('a'), l('b')], []],
    ['a gap (window past what was printed) prints all', [l('a')], [l('x'), l('y')], [l('x'), l('y')]],
    [
      'timestamps tell repeated messages apart',
      [l('tick', 1), l('tick', 2)],
      [l('tick', 2), l('tick', 3)],
      [l('tick', 3)],
    ],
  ])('%s', (_name, printed, fetched, expected) => {
    expect(newLines(printed, fetched)).toEqual(expected);
  });

  it('reads lines as strings or { timestamp, message } objects', () => {
    expect(logLinesOf({ lines: ['a', 'b'] })).toEqual([l('a'), l('b')]);
    expect(logLinesOf({ events: [{ timestamp: 5, message: 'x' }, { bogus: 1 }] })).toEqual([l('x', 5)]);
  });
});

describe('formatSweepPlan', () => {
  it('shows one row per job: its parameters, tier, runtime and reservation, "?" where the estimate lacks one', () => {
    const jobs = [
      { index: 1, params: { lr: '1e-3', n_layer: '2' } },
      { index: 2, params: { lr: '3e-4', n_layer: '12' } },
    ];
    const estimates = [
      { tier: 'gpu-small', estimate: { runtimeSeconds: 5400, reservationUsd: 1.25 } },
      { tier: 'gpu-medium', runtime: { value: 90 } },
    ];

    expect(formatSweepPlan(jobs, estimates).split('\n')).toEqual([
      '#  LR    N_LAYER  TIER        RUNTIME  RESERVES',
      '1  1e-3  2        gpu-small   1h 30m   $1.25',
      '2  3e-4  12       gpu-medium  1m 30s   ?',
    ]);
  });
});

describe('formatJobsTable', () => {
  const job = (jobId: string, labels?: Record<string, string>) => ({
    jobId,
    state: 'RUNNING',
    tier: 'gpu-small',
    createdAt: '2026-03-15T12:00:00.000Z',
    costSoFarUsd: 1.5,
    command: ['python', 'train.py'],
    ...(labels && { labels }),
  });

  it('has no LABELS column when no job on the page has labels', () => {
    expect(formatJobsTable({ jobs: [job('j1')] })).toBe(
      [
        'JOB  STATE    TIER       CREATED                   COST   COMMAND',
        'j1   RUNNING  gpu-small  2026-03-15T12:00:00.000Z  $1.50  python train.py',
      ].join('\n'),
    );
  });

  it('shows labels in key order when one does, and the cursor after the table', () => {
    expect(formatJobsTable({ jobs: [job('j2', { sweep: 's1', lr: '0.1' }), job('j1')], nextCursor: 'abc' })).toBe(
      [
        'JOB  STATE    TIER       CREATED                   COST   LABELS           COMMAND',
        'j2   RUNNING  gpu-small  2026-03-15T12:00:00.000Z  $1.50  lr=0.1 sweep=s1  python train.py',
        'j1   RUNNING  gpu-small  2026-03-15T12:00:00.000Z  $1.50                   python train.py',
        '(more: --cursor abc)',
      ].join('\n'),
    );
  });

  it('tells an empty page with a cursor (a filtered read that found nothing yet) from the end of the list', () => {
    expect(formatJobsTable({ jobs: [] })).toBe('No jobs.');
    expect(formatJobsTable({ jobs: [], nextCursor: 'abc' })).toBe(
      'No matching jobs on this page; older jobs remain: --cursor abc',
    );
  });
});

describe('progressLine', () => {
  const io = (out: string[]) => ({
    stdout: (text: string) => {
      out.push(text);
    },
    stderr: () => {},
    isTTY: true,
    confirm: async () => false,
  });

  it('redraws at most every interval unless forced, and clears only a line it drew', () => {
    const out: string[] = [];
    let now = 0;
    const line = progressLine(io(out), true, 200, () => now);
    line.show('a');
    now = 100;
    line.show('b');
    line.show('c', true);
    now = 250;
    line.show('d');
    now = 400;
    line.show('e');
    line.done();
    line.done();
    expect(out).toEqual(['\r\x1b[2Ka', '\r\x1b[2Kc', '\r\x1b[2Ke', '\r\x1b[2K']);
  });

  it('writes nothing when not enabled (a pipe, a log, a --json document)', () => {
    const out: string[] = [];
    const line = progressLine(io(out), false);
    line.show('a', true);
    line.done();
    expect(out).toEqual([]);
  });
});
