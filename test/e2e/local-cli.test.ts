/**
 * End to end through the CLI: `trainyard local` (in-process, foreground until told to stop), `submit` of the
 * torch-free example, `local interrupt` after a checkpoint, `watch` to success, `status`/`budgets` for the settled
 * figures, then a second job the team budget cannot cover, refused by the cost gate with the budget's numbers.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT_CODES } from '../../lib/cli/exit-codes';
import { s3rverObjectPath } from '../../lib/local/cli-commands';
import { LOCAL_PRINCIPAL_ARN } from '../../lib/local/local-mode';
import { readLocalState } from '../../lib/local/token';
import { extractMetrics } from '../support/emf';
import {
  cents,
  expectedAttemptCostUsd,
  HELLO_CPU,
  json,
  SPOT_USD_PER_HOUR,
  tempDir,
  trainyard,
  until,
  watchToEnd,
  writeConfig,
} from './support';

const STEPS = 1500;
const COMMAND = ['python', 'train.py', `--max_iters=${STEPS}`, '--step_delay=0.01', '--checkpoint_interval=100'];

/**
 * A trainer whose second checkpoint cannot be loaded: it saves step 1, then (after `--garbage_after` seconds, so the
 * harness has uploaded step 1 on its own) overwrites it with bytes no resume can read, and waits to be interrupted.
 * Restored, it loads its state (exit 1 if it cannot), reports the next step and finishes.
 */
const UNLOADABLE_TRAINER = `
import json, os, sys, time
path = os.path.join(os.environ['TRAINYARD_CHECKPOINT_DIR'], 'state.json')
if os.path.exists(path):
    try:
        step = json.load(open(path))['step']
    except ValueError:
        sys.exit('cannot load ' + path)
    print(f'step={step + 1} loss=0.5', flush=True)
    json.dump({'step': step + 1}, open(path, 'w'))
    sys.exit(0)
os.makedirs(os.path.dirname(path), exist_ok=True)
json.dump({'step': 1}, open(path, 'w'))
print('step=1 loss=1.0', flush=True)
time.sleep(float(sys.argv[1].split('=')[1]))
open(path, 'w').write('garbage, as a save cut short by a crash leaves it')
time.sleep(300)
`;

type Attempt = {
  attempt: number;
  capacity: string;
  startedAt: number;
  stoppedAt: number;
  usdPerHour: number;
  costUsd: number;
  outcome?: { kind: string };
};

describe('local mode through the CLI', () => {
  const dir = tempDir('e2e-cli');
  const localDir = join(dir, '.trainyard');
  let stopLocal: (why: string) => void = () => undefined;
  let localRun: Promise<{ code: number; stdout: string; stderr: string }>;

  beforeAll(async () => {
    const configPath = writeConfig(dir);
    const stopped = new Promise<string>((done) => {
      stopLocal = done;
    });
    localRun = trainyard(['local', '--dir', localDir, '--config', configPath], localDir, {
      untilStopped: () => stopped,
      localModeOptions: { retryIntervalMs: 0, backoffWaitMs: 0, syncIntervalSeconds: 2 },
    });
    await until('local mode to write local.json', async () => readLocalState(localDir));
  });

  afterAll(async () => {
    stopLocal('test cleanup');
    await localRun;
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs a job through a spot interruption to success, settles the ledger, and refuses one over budget', async () => {
    // Submit.
    const submitted = await trainyard(
      ['submit', HELLO_CPU, '--tier', 'cpu-test', '--yes', '--json', '--', ...COMMAND],
      localDir,
    );
    expect(submitted.code, submitted.stderr).toBe(EXIT_CODES.ok);
    const jobId = String((json(submitted).job as { jobId: string }).jobId);

    // Interrupt once a complete checkpoint exists (so the resume has something to start from).
    await until('a complete checkpoint of the running job', async () => {
      const run = await trainyard(['checkpoints', jobId, '--json'], localDir);
      const list = (json(run).checkpoints as unknown[] | undefined) ?? [];
      return list.length > 0 ? list : undefined;
    });
    const interrupted = await trainyard(['local', 'interrupt', jobId, '--json'], localDir);
    expect(interrupted.code, interrupted.stderr).toBe(EXIT_CODES.ok);
    // cpu-test is a CPU tier: on AWS its spot attempts run on Fargate Spot, which sends SIGTERM and no EC2 notice.
    expect(json(interrupted)).toMatchObject({ jobId, platform: 'FARGATE', noticeTime: expect.any(String) });
    expect(json(interrupted)).not.toHaveProperty('instanceId');

    // Wait for the end: `watch` exits 0 only for SUCCEEDED.
    await watchToEnd(jobId, localDir);

    const status = json(await trainyard(['status', jobId, '--json'], localDir)) as {
      job: { state: string; team: string; user: string; progress: { step: number; totalSteps: number } };
      attempts: Attempt[];
      costSoFarUsd: number;
    };
    expect(status.job.state).toBe('SUCCEEDED');
    expect(status.job.team).toBe('e2e');
    expect(status.job.user).toBe(LOCAL_PRINCIPAL_ARN.split('/').at(-1));
    expect(status.job.progress.step).toBe(STEPS);
    expect(status.job.progress.totalSteps).toBe(STEPS);
    expect(status.attempts.length).toBeGreaterThanOrEqual(2);
    expect(status.attempts[0]?.outcome?.kind).toBe('reclaimed');
    expect(status.attempts.at(-1)?.outcome?.kind).toBe('succeeded');
    expect(status.attempts.map((a) => a.attempt)).toEqual(status.attempts.map((_, i) => i + 1));

    // Each attempt's cost, worked out independently from its own start, stop and price.
    for (const attempt of status.attempts) {
      expect(attempt.capacity).toBe('spot');
      expect(attempt.usdPerHour).toBe(SPOT_USD_PER_HOUR);
      expect(attempt.costUsd).toBe(expectedAttemptCostUsd(attempt.startedAt, attempt.stoppedAt, attempt.usdPerHour));
    }
    const spentCents = status.attempts.reduce((sum, a) => sum + cents(a.costUsd), 0);
    expect(spentCents).toBeGreaterThanOrEqual(6); // two spot attempts of at least 60 s at $1.80/h
    expect(cents(status.costSoFarUsd)).toBe(spentCents);

    // The reclaim was counted once, as an EMF line in the local folder where a deployment's log would hold it; Fargate
    // sent no EC2 warning to count.
    const metrics = extractMetrics(readFileSync(join(localDir, 'metrics.jsonl'), 'utf8').split('\n'));
    expect(
      metrics.filter((m) => m.metric === 'SpotReclaims').map(({ dimensions, value }) => ({ dimensions, value })),
    ).toEqual([{ dimensions: { Tier: 'cpu-test' }, value: 1 }]);
    expect(metrics.filter((m) => m.metric === 'SpotInterruptions')).toEqual([]);

    // The ledger: nothing reserved any more, spent equal to the attempts' costs to the cent.
    const budgets = json(await trainyard(['budgets', '--json'], localDir)) as {
      budgets: Array<{ scope: string; limitUsd: number; spentUsd: number; reservedUsd: number; availableUsd: number }>;
    };
    const team = budgets.budgets.find((b) => b.scope === 'team:e2e');
    expect(team).toBeDefined();
    expect(team?.reservedUsd).toBe(0);
    expect(cents(team?.spentUsd ?? -1)).toBe(spentCents);
    expect(cents(team?.availableUsd ?? -1)).toBe(100 - spentCents);

    // The showback of the days it ran holds the job at the attempts' costs to the cent.
    const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);
    const showback = json(
      await trainyard(
        ['report', '--from', dayOf(Date.now() - 86_400_000), '--to', dayOf(Date.now()), '--json'],
        localDir,
      ),
    ) as { team: string; totals: { costUsd: number; spotUsd: number; jobs: number }; jobs: Array<{ jobId: string }> };
    expect(showback.team).toBe('e2e');
    expect(cents(showback.totals.costUsd)).toBe(spentCents);
    expect(cents(showback.totals.spotUsd)).toBe(spentCents);
    expect(showback.jobs.map((j) => j.jobId)).toEqual([jobId]);

    // The weekly report, run now as its schedule would: last week's, written to the workspace where it says.
    const weekly = await trainyard(['local', 'report', 'weekly', '--json'], localDir);
    expect(weekly.code, weekly.stderr).toBe(EXIT_CODES.ok);
    const written = (json(weekly).written as Array<{ team?: string; uri: string }>) ?? [];
    expect(written.map((w) => w.team ?? 'all teams')).toEqual(['e2e', 'other', 'all teams']);
    for (const report of written) {
      const key = report.uri.replace('s3://trainyard-workspace/', '');
      expect(key).toMatch(/^reports\/weekly\/\d{4}-\d{2}-\d{2}\/(teams\/(e2e|other)|all-teams)\.json$/);
      expect(existsSync(s3rverObjectPath(join(localDir, 's3'), 'trainyard-workspace', key))).toBe(true);
    }

    // The summary is in the workspace (s3rver's files under the local folder).
    const summary = s3rverObjectPath(
      join(localDir, 's3'),
      'trainyard-workspace',
      `teams/e2e/jobs/${jobId}/summary.json`,
    );
    expect(existsSync(summary)).toBe(true);

    // A finished job has nothing to interrupt: a clear message and exit 5.
    const again = await trainyard(['local', 'interrupt', jobId], localDir);
    expect(again.code).toBe(EXIT_CODES.notFound);
    expect(again.stderr).toContain(`job ${jobId} (SUCCEEDED) has no running attempt to interrupt`);

    // A job whose estimate is over what the budget has left is refused by the cost gate, with the numbers.
    const big = await trainyard(
      ['submit', HELLO_CPU, '--tier', 'cpu-huge', '--runtime', '1h', '--yes', '--json', '--', ...COMMAND],
      localDir,
    );
    expect(big.code, big.stderr).toBe(EXIT_CODES.ok);
    const bigId = String((json(big).job as { jobId: string }).jobId);
    const bigWatch = await watchToEnd(bigId, localDir, EXIT_CODES.jobUnsuccessful);
    const refused = json(await trainyard(['status', bigId, '--json'], localDir)) as {
      job: { state: string; reason: string };
      attempts: unknown[];
    };
    expect(refused.job.state).toBe('REJECTED');
    expect(refused.attempts).toEqual([]);
    const available = (100 - spentCents) / 100;
    const spent = (spentCents / 100).toFixed(2);
    expect(refused.job.reason).toContain(
      `team:e2e would exceed its budget: limit $1.00, spent $${spent}, reserved $0.00, requested $`,
    );
    expect(refused.job.reason).toContain(`available $${available.toFixed(2)}`);
    const requested = Number(/requested \$([\d.]+)/.exec(refused.job.reason)?.[1]);
    expect(requested).toBeGreaterThan(available);
    expect(bigWatch.stderr).toContain('REJECTED');

    // The refusal left the ledger as it was.
    const after = json(await trainyard(['budgets', '--json'], localDir)) as typeof budgets;
    expect(after.budgets.find((b) => b.scope === 'team:e2e')).toMatchObject({
      reservedUsd: 0,
      spentUsd: team?.spentUsd,
    });
  });

  it('resumes past a checkpoint that cannot be loaded: tried twice, set aside, the one before restored', async () => {
    const project = join(dir, 'unloadable');
    mkdirSync(project);
    writeFileSync(join(project, 'train.py'), UNLOADABLE_TRAINER);
    const submitted = await trainyard(
      ['submit', project, '--tier', 'cpu-test', '--yes', '--json', '--', 'python', 'train.py', '--garbage_after=4'],
      localDir,
    );
    expect(submitted.code, submitted.stderr).toBe(EXIT_CODES.ok);
    const jobId = String((json(submitted).job as { jobId: string }).jobId);

    await until('both checkpoints, the good one and the unloadable one', async () => {
      const list = (json(await trainyard(['checkpoints', jobId, '--json'], localDir)).checkpoints ?? []) as unknown[];
      return list.length === 2 ? list : undefined;
    });
    const interrupted = await trainyard(['local', 'interrupt', jobId, '--json'], localDir);
    expect(interrupted.code, interrupted.stderr).toBe(EXIT_CODES.ok);
    // No app-error retries were asked for: failures right after a restore have their own budget.
    await watchToEnd(jobId, localDir);

    const status = json(await trainyard(['status', jobId, '--json'], localDir)) as {
      job: { state: string; counters: Record<string, number> };
      attempts: Attempt[];
    };
    expect(status.job.state).toBe('SUCCEEDED');
    expect(status.attempts.map((a) => a.outcome?.kind)).toEqual([
      'reclaimed',
      'resume-failed',
      'resume-failed',
      'succeeded',
    ]);
    expect(status.job.counters).toMatchObject({ attempts: 4, reclaims: 1, resumeFailures: 2, appErrors: 0 });

    const listed = json(await trainyard(['checkpoints', jobId, '--json'], localDir)).checkpoints as Array<{
      name: string;
      step: number;
      resumeFailures: number;
      setAside: boolean;
    }>;
    // ckpt-000003 was saved by the last attempt, which resumed from step 1, the checkpoint before the unloadable one;
    // retention then dropped the set-aside ckpt-000002, older than a usable checkpoint.
    expect(listed.map((c) => [c.name, c.step, c.resumeFailures, c.setAside])).toEqual([
      ['ckpt-000003', 2, 0, false],
      ['ckpt-000001', 1, 0, false],
    ]);
    const resumed = readFileSync(join(localDir, 'events.jsonl'), 'utf8')
      .split('\n')
      .filter((line) => line.includes(jobId) && line.includes('Job Resumed'))
      .map((line) => (JSON.parse(line) as { detail: { attempt: number; reason: string } }).detail);
    expect(resumed.map((d) => [d.attempt, d.reason])).toEqual([
      [2, 'resuming from ckpt-000002 (step 1)'],
      [3, 'resuming from ckpt-000002 (step 1)'],
      [4, 'resuming from ckpt-000001 (step 1)'],
    ]);
  });

  it('refuses a job id outside the team and says when no local mode runs for a folder', async () => {
    const otherTeamJob = await trainyard(['local', 'interrupt', 'jnotourjob00000000000'], localDir);
    expect(otherTeamJob.code).toBe(EXIT_CODES.notFound);
    expect(otherTeamJob.stderr).toContain('no job jnotourjob00000000000 in team e2e');

    const stopped = await trainyard(['local', 'stop', '--dir', join(dir, 'nothing-here')], localDir);
    expect(stopped.code).toBe(EXIT_CODES.unreachable);
    expect(stopped.stderr).toContain('local mode is not running');
  });

  it('`local stop` signals the running local mode, which stops cleanly and removes local.json', async () => {
    const signals: string[] = [];
    const stop = await trainyard(['local', 'stop', '--dir', localDir], localDir, {
      kill: (pid, signal) => {
        signals.push(`${pid}:${signal}`);
        stopLocal(signal);
      },
    });
    expect(stop.code, stop.stderr).toBe(EXIT_CODES.ok);
    expect(signals).toEqual([`${process.pid}:SIGTERM`]);
    expect(stop.stdout).toContain('Local mode stopped.');
    const local = await localRun;
    expect(local.code).toBe(EXIT_CODES.ok);
    expect(local.stdout).toContain('Stopping local mode (SIGTERM)');
    expect(readLocalState(localDir)).toBeUndefined();
    // Its claim on the folder is released with it: the next start there finds none.
    expect(existsSync(join(localDir, 'local.lock'))).toBe(false);
    const after = await trainyard(['jobs'], localDir);
    expect(after.code).toBe(EXIT_CODES.unreachable);
  });
});
