/**
 * Valid job and attempt records for tests, with overrides: one job of team vision on gpu-small (the id and times of
 * the Batch event fixtures, test/fixtures/events/README.md) and its first spot attempt.
 */
import type { AttemptRecord, JobRecord } from '../../lambdas/domain/job';

/** The job every fixture is about. */
export const JOB_ID = '01JDA7Q6ZK3V8N2M4P5R6S7T8W';
/** Fixture times (epoch ms): Batch createdAt, startedAt, stoppedAt (test/fixtures/events/README.md). */
export const T = { created: 1_795_183_200_000, started: 1_795_183_265_000, stopped: 1_795_185_667_250 } as const;

/** A valid job record with overrides. */
export function jobRecord(overrides: Partial<JobRecord> = {}): JobRecord {
  return {
    jobId: JOB_ID,
    team: 'vision',
    user: 'alice',
    tier: 'gpu-small',
    state: 'RUNNING',
    createdAt: new Date(T.created).toISOString(),
    command: ['python', 'train.py'],
    requirements: {},
    retries: { maxAppRetries: 0, backoffSeconds: 60 },
    counters: { attempts: 0, reclaims: 0, capacityCancellations: 0, appErrors: 0, infraErrors: 0, resumeFailures: 0 },
    costSoFarUsd: 0,
    bundle: { key: `teams/vision/jobs/${JOB_ID}/code.tar.gz`, bytes: 1024, sha256: 'a'.repeat(64) },
    env: {},
    ...overrides,
  };
}

/** A valid attempt record with overrides. */
export function attemptRecord(overrides: Partial<AttemptRecord> = {}): AttemptRecord {
  return {
    jobId: JOB_ID,
    attempt: 1,
    capacity: 'spot',
    queue: 'trainyard-gpu-small-spot',
    nodes: 1,
    status: 'SUBMITTED',
    ...overrides,
  };
}
