/**
 * Restarting local mode: jobs, budgets and checkpoints survive in the persistent engines (dynalite's LevelDB,
 * s3rver's files); a job whose execution was cut off by the stop is finalized FAILED at the next start, its ledger
 * entry settled to what its attempts cost, so nothing stays reserved. An attempt a crashed local mode left running
 * is killed at the next start.
 */
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EXIT_CODES } from '../../lib/cli/exit-codes';
import { parseConfig } from '../../lib/config';
import { INTERRUPTED_BY_RESTART_REASON, type LocalMode, startLocalMode } from '../../lib/local/local-mode';
import { cents, E2E_CONFIG, HELLO_CPU, json, tempDir, trainyard, until, watchToEnd } from './support';

type Status = {
  job: { state: string; reason?: string; progress?: { step?: number }; cancelRequested?: boolean };
  attempts: Array<{ attempt: number; costUsd?: number; stoppedAt?: number }>;
  costSoFarUsd: number;
};
type Budgets = { budgets: Array<{ scope: string; spentUsd: number; reservedUsd: number; limitUsd: number }> };

const start = (dir: string) =>
  startLocalMode({
    dir,
    config: parseConfig(E2E_CONFIG),
    retryIntervalMs: 0,
    backoffWaitMs: 0,
    syncIntervalSeconds: 2,
  });

describe('restarting local mode', () => {
  const dir = tempDir('restart');
  let mode: LocalMode | undefined;

  afterAll(async () => {
    await mode?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps jobs, budgets and checkpoints, and finalizes a job cut off by the stop', async () => {
    mode = await start(dir);
    const submit = async (args: string[]) => {
      const run = await trainyard(['submit', HELLO_CPU, '--tier', 'cpu-test', '--yes', '--json', '--', ...args], dir);
      expect(run.code, run.stderr).toBe(EXIT_CODES.ok);
      return String((json(run).job as { jobId: string }).jobId);
    };

    // A finished job, with checkpoints.
    const done = await submit(['python', 'train.py', '--max_iters=300', '--checkpoint_interval=100']);
    await watchToEnd(done, dir, EXIT_CODES.ok, mode?.runner);
    const doneBefore = json(await trainyard(['status', done, '--json'], dir)) as Status;
    const checkpointsBefore = json(await trainyard(['checkpoints', done, '--json'], dir)).checkpoints as unknown[];
    expect(checkpointsBefore.length).toBeGreaterThan(0);

    // A job still running when local mode stops (it would run for minutes).
    const cut = await submit([
      'python',
      'train.py',
      '--max_iters=100000',
      '--step_delay=0.01',
      '--checkpoint_interval=50',
    ]);
    // And one cancelled just before the stop, which cuts off its lifecycle while the harness checkpoints.
    const cancelled = await submit(['python', 'train.py', '--max_iters=100000', '--step_delay=0.01']);
    const cutCheckpoints = await until('the long job to be running with a checkpoint', async () => {
      const list = json(await trainyard(['checkpoints', cut, '--json'], dir)).checkpoints as unknown[] | undefined;
      return list && list.length > 0 ? list : undefined;
    });
    await until('the job to cancel to be running', async () => {
      const status = json(await trainyard(['status', cancelled, '--json'], dir)) as Status;
      return status.job.state === 'RUNNING' ? status : undefined;
    });
    const cancel = await trainyard(['cancel', cancelled], dir);
    expect(cancel.code, cancel.stderr).toBe(EXIT_CODES.ok);
    await mode.stop();
    mode = undefined;

    // Nothing answers while it is stopped.
    const down = await trainyard(['status', done], dir);
    expect(down.code).toBe(EXIT_CODES.unreachable);

    // What a crash (rather than this stop) would have left: an attempt's process still running in this folder.
    const orphanId = '00000000-0000-4000-8000-00000000c0de';
    const orphan = spawn('/usr/bin/python3', ['-c', 'import time; time.sleep(120)'], {
      env: { AWS_BATCH_JOB_ID: orphanId, TRAINYARD_WORK_DIR: join(dir, 'attempts', orphanId, 'code') },
      stdio: 'ignore',
    });
    const orphanEnded = new Promise((done) => orphan.once('exit', (_code, signal) => done(signal)));

    mode = await start(dir);

    expect(mode.reaped).toEqual([{ batchJobId: orphanId, pids: [orphan.pid] }]);
    expect(await orphanEnded).toBe('SIGKILL');

    // The finished job, its checkpoints and the budget are as they were.
    const doneAfter = json(await trainyard(['status', done, '--json'], dir)) as Status;
    expect(doneAfter.job).toEqual(doneBefore.job);
    expect(doneAfter.attempts).toEqual(doneBefore.attempts);
    const checkpointsAfter = json(await trainyard(['checkpoints', done, '--json'], dir)).checkpoints as unknown[];
    expect(checkpointsAfter.map((c) => (c as { name: string }).name)).toEqual(
      checkpointsBefore.map((c) => (c as { name: string }).name),
    );

    // The cut-off job is over, and its cost is settled: the team has nothing reserved and spent exactly the
    // recorded costs of both jobs' attempts.
    const cutAfter = json(await trainyard(['status', cut, '--json'], dir)) as Status;
    expect(mode.recovered).toContain(cut);
    expect(cutAfter.job.state).toBe('FAILED');
    expect(cutAfter.job.reason).toBe(INTERRUPTED_BY_RESTART_REASON);
    expect(cutAfter.attempts).toHaveLength(1);
    expect(cutAfter.attempts[0]?.stoppedAt).toBeDefined();
    expect(cutAfter.attempts[0]?.costUsd).toBeGreaterThan(0);
    const cutCheckpointsAfter = json(await trainyard(['checkpoints', cut, '--json'], dir)).checkpoints as unknown[];
    const names = (list: unknown[]) => list.map((c) => (c as { name: string }).name);
    // Checkpoints may have advanced (and old ones been pruned) between the look and the stop: none went back.
    const newest = (list: unknown[]) => names(list).sort().at(-1) ?? '';
    expect(cutCheckpointsAfter.length).toBeGreaterThan(0);
    expect(newest(cutCheckpointsAfter) >= newest(cutCheckpoints)).toBe(true);
    // The cancelled one ends as its records say, CANCELLED, as execution-ended ends it on AWS; not FAILED.
    const cancelledAfter = json(await trainyard(['status', cancelled, '--json'], dir)) as Status;
    expect(cancelledAfter.job).toMatchObject({ state: 'CANCELLED', cancelRequested: true });
    const budgets = json(await trainyard(['budgets', '--json'], dir)) as Budgets;
    const team = budgets.budgets.find((b) => b.scope === 'team:e2e');
    const recorded = [...doneAfter.attempts, ...cutAfter.attempts, ...cancelledAfter.attempts].reduce(
      (sum, a) => sum + cents(a.costUsd ?? 0),
      0,
    );
    expect(team?.reservedUsd).toBe(0);
    expect(cents(team?.spentUsd ?? -1)).toBe(recorded);
    expect(recorded).toBeGreaterThan(0);

    // And the restarted local mode runs new work.
    const next = await submit(['python', 'train.py', '--max_iters=100']);
    await watchToEnd(next, dir, EXIT_CODES.ok, mode?.runner);
  });
});
