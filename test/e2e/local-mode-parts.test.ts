/**
 * The pieces local mode composes, checked without engines: who it acts as, which queues exist, the EventBridge
 * envelopes it wraps runner output in (accepted by the handlers' own parsers), and the environment it adds.
 */
import { describe, expect, it } from 'vitest';
import { parseBatchStateChangeEvent, parseScheduledEvent } from '../../lambdas/shared/event-schemas';
import { parseConfig } from '../../lib/config';
import type { SubmitJobInput } from '../../lib/local/local-batch';
import {
  batchStateChangeEvent,
  LOCAL_PRINCIPAL_ARN,
  LocalModeError,
  localModeConfig,
  localQueues,
  scheduledEvent,
  withEnvironment,
} from '../../lib/local/local-mode';

const OTHER = 'arn:aws:iam::123456789012:role/vision';

const config = parseConfig({
  teams: [
    { id: 'nlp', monthlyBudgetUsd: 100 },
    { id: 'vision', principals: [OTHER], monthlyBudgetUsd: 50 },
  ],
  admins: ['arn:aws:iam::123456789012:role/admin'],
});

describe('localModeConfig: the principal local mode acts as', () => {
  it.each([
    {
      name: 'the first team, which lists no principals: the local principal is added to it and to the admins',
      team: undefined,
      principal: LOCAL_PRINCIPAL_ARN,
      teamId: 'nlp',
      admins: ['arn:aws:iam::123456789012:role/admin', LOCAL_PRINCIPAL_ARN],
      nlpPrincipals: [LOCAL_PRINCIPAL_ARN],
    },
    {
      name: 'a team with principals: its first one, the config unchanged',
      team: 'vision',
      principal: OTHER,
      teamId: 'vision',
      admins: ['arn:aws:iam::123456789012:role/admin'],
      nlpPrincipals: [],
    },
  ])('$name', ({ team, principal, teamId, admins, nlpPrincipals }) => {
    const local = localModeConfig(config, team);
    expect(local.principalArn).toBe(principal);
    expect(local.team.id).toBe(teamId);
    expect(local.config.admins).toEqual(admins);
    expect(local.config.teams.find((t) => t.id === 'nlp')?.principals).toEqual(nlpPrincipals);
    expect(local.config.teams.find((t) => t.id === 'vision')?.principals).toEqual([OTHER]);
  });

  it('leaves the given config object untouched', () => {
    localModeConfig(config);
    expect(config.teams[0]?.principals).toEqual([]);
    expect(config.admins).toEqual(['arn:aws:iam::123456789012:role/admin']);
  });

  it('refuses a team the config does not define, naming the teams it has', () => {
    expect(() => localModeConfig(config, 'audio')).toThrow(LocalModeError);
    expect(() => localModeConfig(config, 'audio')).toThrow(
      'team "audio" is not in the configuration; teams: nlp, vision',
    );
  });
});

describe('localQueues', () => {
  it('has a spot and an on-demand queue per tier, and no spot queue for a tier that disallows spot', () => {
    const queues = localQueues(config, 'trainyard');
    expect(queues.get('trainyard-cpu-small-spot')).toMatchObject({ capacity: 'spot', tier: { id: 'cpu-small' } });
    expect(queues.get('trainyard-cpu-small-on-demand')).toMatchObject({ capacity: 'on-demand' });
    expect(queues.get('trainyard-gpu-multinode-on-demand')).toMatchObject({ capacity: 'on-demand' });
    expect(queues.has('trainyard-gpu-multinode-spot')).toBe(false);
    expect(queues.size).toBe(config.tiers.length * 2 - config.tiers.filter((t) => !t.spotAllowed).length);
  });
});

describe('EventBridge envelopes', () => {
  it('wraps a runner state change so the batch-events parser accepts it', () => {
    const detail = {
      jobArn: 'arn:aws:batch:us-east-1:000000000000:job/abc',
      jobName: 'j1-a1',
      jobId: 'abc',
      jobQueue: 'arn:aws:batch:us-east-1:000000000000:job-queue/trainyard-cpu-small-spot',
      status: 'RUNNABLE',
      attempts: [],
      createdAt: 1_795_000_000_000,
      jobDefinition: 'arn:aws:batch:us-east-1:000000000000:job-definition/trainyard-nlp-cpu-small:1',
      container: {},
      tags: { 'trainyard:job-id': 'j1' },
    };
    const event = batchStateChangeEvent(detail, Date.UTC(2026, 10, 21, 7, 0, 5, 250));
    const parsed = parseBatchStateChangeEvent(event);
    expect(parsed.job.jobId).toBe('abc');
    expect(parsed.job.status).toBe('RUNNABLE');
    expect(event.time).toBe('2026-11-21T07:00:05Z');
    expect(event.resources).toEqual([detail.jobArn]);
    expect(batchStateChangeEvent(detail, 0).id).not.toBe(event.id);
  });

  it('builds a Scheduled Event the budget-watch parser accepts', () => {
    const at = Date.UTC(2026, 10, 21, 7, 5, 0);
    const tick = parseScheduledEvent(scheduledEvent(at));
    expect(tick.timeMs).toBe(at);
  });
});

describe('withEnvironment', () => {
  const input: SubmitJobInput = {
    JobName: 'j1-a1',
    JobQueue: 'trainyard-cpu-small-spot',
    JobDefinition: 'trainyard-nlp-cpu-small',
    ContainerOverrides: { Command: ['python', 'train.py'], Environment: [{ Name: 'TRAINYARD_JOB_ID', Value: 'j1' }] },
  };

  it('adds a variable the submission lacks, keeping the rest', () => {
    const out = withEnvironment(input, 'TRAINYARD_SYNC_INTERVAL_SECONDS', '10');
    expect(out.ContainerOverrides?.Environment).toEqual([
      { Name: 'TRAINYARD_JOB_ID', Value: 'j1' },
      { Name: 'TRAINYARD_SYNC_INTERVAL_SECONDS', Value: '10' },
    ]);
    expect(out.ContainerOverrides?.Command).toEqual(['python', 'train.py']);
    expect(input.ContainerOverrides?.Environment).toHaveLength(1);
  });

  it('keeps a value the submission already sets', () => {
    expect(withEnvironment(input, 'TRAINYARD_JOB_ID', 'other')).toBe(input);
  });

  it('adds it to every node group of a multi-node submission, which has no ContainerOverrides', () => {
    const overrides = { Command: ['torchrun', 'train.py'], Environment: [{ Name: 'TRAINYARD_JOB_ID', Value: 'j1' }] };
    const multiNode: SubmitJobInput = {
      JobName: 'j1-a1',
      JobQueue: 'trainyard-gpu-multinode-on-demand',
      JobDefinition: 'trainyard-nlp-gpu-multinode',
      NodeOverrides: { NodePropertyOverrides: [{ TargetNodes: '0:', ContainerOverrides: overrides }] },
    };

    const out = withEnvironment(multiNode, 'TRAINYARD_SYNC_INTERVAL_SECONDS', '10');

    expect(out.ContainerOverrides).toBeUndefined();
    expect(out.NodeOverrides?.NodePropertyOverrides).toEqual([
      {
        TargetNodes: '0:',
        ContainerOverrides: {
          Command: ['torchrun', 'train.py'],
          Environment: [
            { Name: 'TRAINYARD_JOB_ID', Value: 'j1' },
            { Name: 'TRAINYARD_SYNC_INTERVAL_SECONDS', Value: '10' },
          ],
        },
      },
    ]);
    expect(withEnvironment(out, 'TRAINYARD_SYNC_INTERVAL_SECONDS', '20')).toBe(out);
  });
});
