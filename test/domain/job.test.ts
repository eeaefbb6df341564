import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  assertTransition,
  IllegalTransition,
  InvalidJobRecord,
  isCheckpointDoneFile,
  isTerminal,
  JOB_STATES,
  type JobState,
  LIVE_STATES,
  parseAttemptRecord,
  parseDecisionRecord,
  parseJobRecord,
} from '../../lambdas/domain/job';

/** The lifecycle as DESIGN.md describes it, written out edge by edge. */
const ALLOWED = new Set([
  'SUBMITTED>ANALYZING',
  'SUBMITTED>REJECTED',
  'SUBMITTED>CANCELLED',
  'SUBMITTED>FAILED',
  'ANALYZING>WAITING',
  'ANALYZING>REJECTED',
  'ANALYZING>CANCELLED',
  'ANALYZING>FAILED',
  'WAITING>RUNNING',
  'WAITING>PAUSED_BUDGET',
  // An attempt can start and finish between two observations of the job (the RUNNING event may arrive late).
  'WAITING>SUCCEEDED',
  'WAITING>CANCELLED',
  'WAITING>FAILED',
  'RUNNING>WAITING',
  'RUNNING>PAUSED_BUDGET',
  'RUNNING>SUCCEEDED',
  'RUNNING>FAILED',
  'RUNNING>CANCELLED',
  'PAUSED_BUDGET>WAITING',
  'PAUSED_BUDGET>CANCELLED',
  'PAUSED_BUDGET>FAILED',
]);

const PAIRS = JOB_STATES.flatMap((from) => JOB_STATES.map((to) => [from, to] as [JobState, JobState]));

describe('assertTransition', () => {
  it.each(PAIRS)('%s → %s', (from, to) => {
    const allowed = from === to || ALLOWED.has(`${from}>${to}`);

    const act = () => assertTransition(from, to);

    if (allowed) expect(act).not.toThrow();
    else expect(act).toThrow(IllegalTransition);
  });

  it('names the states a job may go to instead', () => {
    expect(() => assertTransition('WAITING', 'ANALYZING')).toThrow(
      'job state WAITING → ANALYZING is not allowed; from WAITING a job may go to RUNNING, PAUSED_BUDGET, SUCCEEDED, CANCELLED, FAILED',
    );
  });

  it('says a terminal state never changes', () => {
    expect(() => assertTransition('SUCCEEDED', 'RUNNING')).toThrow(
      'job state SUCCEEDED → RUNNING is not allowed: SUCCEEDED is terminal and never changes',
    );
  });

  it('lets a retried handler repeat the write of a terminal state', () => {
    expect(() => assertTransition('FAILED', 'FAILED')).not.toThrow();
  });

  it.each([
    ['REJECTED', true],
    ['SUCCEEDED', true],
    ['FAILED', true],
    ['CANCELLED', true],
    ['SUBMITTED', false],
    ['ANALYZING', false],
    ['WAITING', false],
    ['RUNNING', false],
    ['PAUSED_BUDGET', false],
  ] as const)('isTerminal(%s) is %s', (state, terminal) => {
    expect(isTerminal(state)).toBe(terminal);
  });
});

const MINIMAL_JOB = {
  jobId: '01JDA7Q6ZK3V8N2M4P5R6S7T8W',
  team: 'vision',
  user: 'arn:aws:iam::123456789012:user/alice',
  tier: 'gpu-small',
  state: 'SUBMITTED',
  createdAt: '2026-11-20T13:40:00.000Z',
  command: ['python', 'train.py'],
  bundle: { key: 'teams/vision/jobs/01JDA7Q6ZK3V8N2M4P5R6S7T8W/code.tar.gz', bytes: 2048, sha256: 'a'.repeat(64) },
};

describe('LIVE_STATES', () => {
  it('is every state a job can still leave, by the edges above', () => {
    const leavable = JOB_STATES.filter((state) => [...ALLOWED].some((edge) => edge.startsWith(`${state}>`)));
    expect(LIVE_STATES).toEqual(leavable);
    expect(LIVE_STATES).toEqual(['SUBMITTED', 'ANALYZING', 'WAITING', 'RUNNING', 'PAUSED_BUDGET']);
    expect(LIVE_STATES.some(isTerminal)).toBe(false);
  });
});

describe('job record schema', () => {
  it('fills counters, retries and cost with their documented defaults', () => {
    const job = parseJobRecord(MINIMAL_JOB);

    expect(job.counters).toEqual({
      attempts: 0,
      reclaims: 0,
      capacityCancellations: 0,
      appErrors: 0,
      infraErrors: 0,
      resumeFailures: 0,
    });
    expect(job.retries).toEqual({ maxAppRetries: 0, backoffSeconds: 60 });
    expect(job.requirements).toEqual({});
    expect(job.costSoFarUsd).toBe(0);
    expect(job.env).toEqual({});
  });

  it('survives a JSON round trip (DynamoDB document, API body) unchanged', () => {
    const job = parseJobRecord({
      ...MINIMAL_JOB,
      project: 'shakespeare',
      state: 'RUNNING',
      requirements: { tier: 'gpu-small', gpuMemoryGiB: 12, runtimeSeconds: 3600, deadlineSeconds: 14_400 },
      retries: { maxAppRetries: 2, backoffSeconds: 30 },
      resumeArgs: ['--init_from=resume'],
      estimate: { costUsd: 0.21, runtimeSeconds: 3500, confidence: 'medium', basis: '10.7M params, 5000 iters' },
      counters: { attempts: 2, reclaims: 1, capacityCancellations: 0, appErrors: 1, infraErrors: 0 },
      costSoFarUsd: 0.113,
      progress: { step: 2500, totalSteps: 5000, fraction: 0.5, loss: 1.42, updatedAt: '2026-11-20T14:10:00Z' },
    });

    expect(parseJobRecord(JSON.parse(JSON.stringify(job)))).toEqual(job);
  });

  it.each([
    [{ jobId: 'has space' }, /jobId: must be 1-80 characters/],
    [{ jobId: 'x'.repeat(81) }, /jobId: must be 1-80 characters/],
    [{ team: 'Vision' }, /team: must be 2-32 characters/],
    [{ state: 'DONE' }, /state: .*"SUBMITTED"/],
    [{ createdAt: '20 Nov 2026' }, /createdAt: /],
    [{ command: [] }, /command: must hold the program and its arguments/],
    [{ retries: { maxAppRetries: 11 } }, /retries\.maxAppRetries: /],
    [{ costSoFarUsd: -1 }, /costSoFarUsd: /],
    [{ surprise: true }, /Unrecognized key.*surprise/],
  ])('refuses %j, naming the field', (change, message) => {
    expect(() => parseJobRecord({ ...MINIMAL_JOB, ...change })).toThrow(InvalidJobRecord);
    expect(() => parseJobRecord({ ...MINIMAL_JOB, ...change })).toThrow(message);
  });
});

describe('attempt and decision record schemas', () => {
  it('accepts an attempt with its outcome and defaults nodes to 1', () => {
    const attempt = parseAttemptRecord({
      jobId: MINIMAL_JOB.jobId,
      attempt: 1,
      capacity: 'spot',
      queue: 'trainyard-gpu-small-spot',
      batchJobId: '7b2e4d61-0c3f-4a9e-8d5b-2c3d4e5f6a02',
      instanceId: 'i-0f2b6a4c9d8e7f123',
      usdPerHour: 0.19,
      startedAt: 1_763_646_120_000,
      stoppedAt: 1_763_648_523_117,
      status: 'FAILED',
      outcome: {
        kind: 'reclaimed',
        reason: 'Batch statusReason "Host EC2 (instance i-0f2b6a4c9d8e7f123) terminated.": reclaimed.',
        instanceId: 'i-0f2b6a4c9d8e7f123',
        resumable: true,
      },
      costUsd: 0.126832,
    });

    expect(attempt.nodes).toBe(1);
    expect(attempt.outcome?.kind).toBe('reclaimed');
  });

  it.each([
    [{ attempt: 0 }, /attempt: /],
    [{ capacity: 'reserved' }, /capacity: .*"spot".*"on-demand"/],
    [{ instanceId: 'i-XYZ' }, /instanceId: must be an EC2 instance id/],
    [{ outcome: { kind: 'exploded', reason: 'x', resumable: false } }, /outcome\.kind: /],
  ])('refuses an attempt with %j', (change, message) => {
    const base = { jobId: MINIMAL_JOB.jobId, attempt: 1, capacity: 'spot', queue: 'q', status: 'RUNNING' };

    expect(() => parseAttemptRecord({ ...base, ...change })).toThrow(message);
  });

  it('accepts a decision and refuses one without a reason', () => {
    const decision = {
      seq: 3,
      at: '2026-11-20T14:02:12Z',
      moment: 'attempt-reclaimed',
      decision: 'run-attempt spot',
      reason: 'Resume on spot: 1 reclaim so far, below the limit of 2.',
    };

    expect(parseDecisionRecord(decision)).toEqual(decision);
    expect(() => parseDecisionRecord({ ...decision, reason: '' })).toThrow(/invalid decision record: reason: /);
  });
});

describe('checkpointDoneFile', () => {
  const SAMPLES = [
    'SAVED',
    'step/SAVED',
    'checkpoint-500/done.json',
    'a_b-c.1',
    'x'.repeat(255),
    'x'.repeat(256),
    // Not '': the API refuses it, and the harness reads an empty variable as unset (PrepareAttempt sets none then).
    '.done',
    'dir/.done',
    '../SAVED',
    'a/../b',
    '/abs',
    'dir/',
    'a//b',
    'has space',
    'SAVED.tmp',
    'SAVED.part',
    'SAVED~',
    'MANIFEST.json',
    'step/MANIFEST.json',
    'MANIFEST.json.bak',
    'ümlaut',
  ];

  it('is accepted by the API exactly when the harness accepts it', () => {
    // The harness's own validation, run for each sample (images/harness/trainyard_harness/settings.py).
    const program = [
      'import json, sys',
      'from trainyard_harness.settings import ConfigError, load_settings',
      'base = {"TRAINYARD_JOB_ID": "j", "TRAINYARD_ATTEMPT": "1", "TRAINYARD_CHECKPOINT_URI": "file:///c", "TRAINYARD_METRICS_URI": "file:///m"}',
      'def ok(path):',
      '    try:',
      '        load_settings({**base, "TRAINYARD_CHECKPOINT_DONE_FILE": path}, ["true"])',
      '        return True',
      '    except ConfigError:',
      '        return False',
      'print(json.dumps([ok(p) for p in json.load(sys.stdin)]))',
    ].join('\n');
    const harness = JSON.parse(
      execFileSync('/usr/bin/python3', ['-c', program], {
        input: JSON.stringify(SAMPLES),
        env: { ...process.env, PYTHONPATH: join(import.meta.dirname, '..', '..', 'images', 'harness') },
        encoding: 'utf8',
      }),
    ) as boolean[];
    const api = SAMPLES.map(isCheckpointDoneFile);

    expect(api).toEqual(harness);
    // Neither side accepts everything, nor refuses everything.
    expect(api.filter(Boolean)).toHaveLength(7);
  });
});
