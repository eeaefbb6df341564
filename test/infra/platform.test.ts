import { Annotations, Match } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { shareIdentifierOf } from '../../lambdas/domain/batch-names';
import { CAPACITY_WAIT_REASON } from '../../lambdas/domain/batch-reasons';
import { buildEvent, EVENT_SCHEMAS } from '../../lambdas/domain/events';
import { SPOT_PROBE_MIN_INSTANCE_TYPES } from '../../lambdas/domain/placement';
import { maxRuntimeSeconds, type TierConfig } from '../../lib/config';
import { ALERTING_DETAIL_TYPES } from '../../lib/events/alerts';
import { ECS_AL2023_GPU_AMI_PARAMETER } from '../../lib/fleet/gpu-launch-template';
import { GPU_INSTANCES } from '../../lib/instance-catalog';
import { gpuTier, resourcesOf, type Synthesized, synthesize, TWO_TEAM_CONFIG } from './synth';

let s: Synthesized;
beforeAll(() => {
  s = synthesize();
});

const gpuTiers = () => s.config.tiers.filter((t) => t.kind === 'gpu');
const singleNodeGpuTiers = () => gpuTiers().filter((t) => t.nodes === 1);
const computeEnvironments = () => resourcesOf(s.platformTemplate, 'AWS::Batch::ComputeEnvironment');
const computeResources = (p: Record<string, unknown>) => p.ComputeResources as Record<string, unknown>;
const queue = (name: string) => {
  const found = resourcesOf(s.platformTemplate, 'AWS::Batch::JobQueue').find(([, p]) => p.JobQueueName === name);
  if (!found) throw new Error(`no queue ${name}`);
  return found[1];
};
const jobDefinition = (team: string, tier: string) => {
  const name = `trainyard-${team}-${tier}`;
  const found = resourcesOf(s.platformTemplate, 'AWS::Batch::JobDefinition').find(
    ([, p]) => p.JobDefinitionName === name,
  );
  if (!found) throw new Error(`no job definition ${name}`);
  return found[1];
};
const ceLogicalId = (tier: TierConfig, kind: 'Spot' | 'OnDemand') => {
  const found = computeEnvironments().find(([id]) => id.startsWith(`FleetTier${tier.id.replaceAll('-', '')}${kind}`));
  if (!found) throw new Error(`no ${kind} environment for ${tier.id}`);
  return found;
};

describe('GPU compute environments', () => {
  it('runs spot environments price-capacity-optimised', () => {
    for (const tier of singleNodeGpuTiers()) {
      const [, props] = ceLogicalId(tier, 'Spot');
      expect(computeResources(props)).toMatchObject({
        Type: 'SPOT',
        AllocationStrategy: 'SPOT_PRICE_CAPACITY_OPTIMIZED',
      });
    }
  });

  it('runs spot on exactly the tier’s instance types and on-demand on its first (no "optimal" classes appended)', () => {
    for (const tier of singleNodeGpuTiers()) {
      expect(computeResources(ceLogicalId(tier, 'Spot')[1]).InstanceTypes).toEqual(tier.instanceTypes);
    }
    for (const tier of gpuTiers()) {
      expect(computeResources(ceLogicalId(tier, 'OnDemand')[1]).InstanceTypes).toEqual(tier.instanceTypes.slice(0, 1));
    }
  });

  it('sizes each environment so that no mix of its types runs more than maxInstances jobs (Batch counts vCPUs)', () => {
    const large = s.config.tiers.find((t) => t.id === 'gpu-large') as TierConfig;
    // g5.2xlarge, g6.2xlarge (8 vCPU) and g5.4xlarge (16 vCPU), 8 instances: 8 × 8 = 64 vCPUs, which holds 8 jobs on
    // the 8-vCPU types and 4 on g5.4xlarge; 16 × 8 would let 16 jobs run on the smaller ones.
    expect(large.instanceTypes).toEqual(['g5.2xlarge', 'g6.2xlarge', 'g5.4xlarge']);
    expect(computeResources(ceLogicalId(large, 'Spot')[1]).MaxvCpus).toBe(8 * 8);
    expect(computeResources(ceLogicalId(large, 'OnDemand')[1]).MaxvCpus).toBe(8 * 8);
    for (const tier of gpuTiers()) {
      const kinds = tier.spotAllowed ? (['Spot', 'OnDemand'] as const) : (['OnDemand'] as const);
      for (const kind of kinds) {
        const resources = computeResources(ceLogicalId(tier, kind)[1]);
        for (const type of resources.InstanceTypes as string[]) {
          const vcpus = GPU_INSTANCES[type]?.vcpus ?? Number.NaN;
          const jobs = Math.floor((resources.MaxvCpus as number) / vcpus / tier.nodes);
          expect(jobs, `${tier.id} ${kind} on ${type}`).toBeLessThanOrEqual(tier.maxInstances);
        }
      }
    }
  });

  it('gives every seed spot tier enough instance types for the spot placement-score probe, so synth warns of none', () => {
    const probeWarnings = Annotations.fromStack(s.platform).findWarning(
      '*',
      Match.stringLikeRegexp('placement scores'),
    );
    expect(probeWarnings).toEqual([]);
    for (const tier of singleNodeGpuTiers()) {
      expect(new Set(tier.instanceTypes).size).toBeGreaterThanOrEqual(SPOT_PROBE_MIN_INSTANCE_TYPES);
    }
  });

  it('warns at synth when a spot tier lists too few instance types for the probe', () => {
    const blind = synthesize({
      ...TWO_TEAM_CONFIG,
      warmCapacity: {},
      tiers: [gpuTier({ id: 'two-types', instanceTypes: ['g5.xlarge', 'g6.xlarge'] })],
    });
    const warnings = Annotations.fromStack(blind.platform).findWarning('*', Match.stringLikeRegexp('placement scores'));
    expect(warnings.map((w) => w.entry.data)).toEqual([
      expect.stringContaining(
        'Tier two-types lists 2 distinct instance type(s); EC2 spot placement scores need 3 to answer',
      ),
    ]);
  });

  it('boots the ECS AL2023 NVIDIA image type', () => {
    for (const tier of gpuTiers()) {
      const [, props] = ceLogicalId(tier, 'OnDemand');
      expect(computeResources(props).Ec2Configuration).toEqual([{ ImageType: 'ECS_AL2023_NVIDIA' }]);
    }
  });

  it('names its launch template’s latest version, so a new AMI or boot script reaches the instances on deploy', () => {
    const environments = computeEnvironments().filter(
      ([, p]) =>
        (p.ComputeResources as { Type?: string }).Type !== 'FARGATE' &&
        (p.ComputeResources as { Type?: string }).Type !== 'FARGATE_SPOT',
    );
    expect(environments.length).toBeGreaterThanOrEqual(2 * singleNodeGpuTiers().length);
    for (const [, props] of environments) {
      const template = computeResources(props).LaunchTemplate as {
        LaunchTemplateId: { Ref: string };
        Version: unknown;
      };
      expect(template.Version).toEqual({ 'Fn::GetAtt': [template.LaunchTemplateId.Ref, 'LatestVersionNumber'] });
    }
  });

  it('keeps warm on-demand capacity only where config asks for it', () => {
    expect(computeResources(ceLogicalId(gpuTiers()[2] as TierConfig, 'OnDemand')[1]).MinvCpus).toBe(8);
    expect(computeResources(ceLogicalId(gpuTiers()[0] as TierConfig, 'OnDemand')[1]).MinvCpus).toBe(0);
  });

  it('gives the multi-node tier no spot environment (Batch multi-node jobs cannot use spot)', () => {
    const multi = gpuTiers().find((t) => t.nodes > 1) as TierConfig;
    expect(() => ceLogicalId(multi, 'Spot')).toThrow(/no Spot environment/);
    expect(() => queue(`trainyard-${multi.id}-spot`)).toThrow(/no queue/);
    expect(queue(`trainyard-${multi.id}-on-demand`)).toBeDefined();
  });

  it('lets the nodes of a multi-node job reach each other, and nothing else in; single-node tiers let nothing in', () => {
    const groupsOf = (tier: TierConfig) =>
      (computeResources(ceLogicalId(tier, 'OnDemand')[1]).SecurityGroupIds as Array<{ 'Fn::GetAtt': string[] }>).map(
        (g) => g['Fn::GetAtt'][0],
      );
    const multi = gpuTiers().find((t) => t.nodes > 1) as TierConfig;
    const [nodesGroup, ...others] = groupsOf(multi);
    expect(others).toEqual([]);
    const ingress = resourcesOf(s.platformTemplate, 'AWS::EC2::SecurityGroupIngress');
    expect(ingress).toEqual([
      [
        expect.any(String),
        expect.objectContaining({
          IpProtocol: '-1',
          GroupId: { 'Fn::GetAtt': [nodesGroup, 'GroupId'] },
          SourceSecurityGroupId: { 'Fn::GetAtt': [nodesGroup, 'GroupId'] },
        }),
      ],
    ]);
    const inlineIngress = resourcesOf(s.platformTemplate, 'AWS::EC2::SecurityGroup').flatMap(
      ([, p]) => (p.SecurityGroupIngress as unknown[] | undefined) ?? [],
    );
    expect(inlineIngress).toEqual([]);
    for (const tier of singleNodeGpuTiers()) expect(groupsOf(tier)).not.toContain(nodesGroup);
  });
});

describe('queues', () => {
  it('feeds each GPU spot queue from its spot environment only, and on-demand from on-demand only', () => {
    for (const tier of singleNodeGpuTiers()) {
      expect(queue(`trainyard-${tier.id}-spot`).ComputeEnvironmentOrder).toEqual([
        { ComputeEnvironment: { 'Fn::GetAtt': [ceLogicalId(tier, 'Spot')[0], 'ComputeEnvironmentArn'] }, Order: 1 },
      ]);
      expect(queue(`trainyard-${tier.id}-on-demand`).ComputeEnvironmentOrder).toEqual([
        { ComputeEnvironment: { 'Fn::GetAtt': [ceLogicalId(tier, 'OnDemand')[0], 'ComputeEnvironmentArn'] }, Order: 1 },
      ]);
    }
  });

  // Every queue cancels, after Batch's minimum of 600 s, a job Batch says no instance can ever hold.
  const unplaceable = [
    {
      Action: 'CANCEL',
      MaxTimeSeconds: 600,
      Reason: 'MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT',
      State: 'RUNNABLE',
    },
    {
      Action: 'CANCEL',
      MaxTimeSeconds: 600,
      Reason: 'MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE',
      State: 'RUNNABLE',
    },
  ];

  it('cancels spot jobs stuck RUNNABLE for the configured capacity wait, and jobs no instance can hold', () => {
    const waitSeconds = s.config.spotPolicy.capacityWaitMinutes * 60;
    for (const tier of s.config.tiers.filter((t) => t.spotAllowed)) {
      expect(queue(`trainyard-${tier.id}-spot`).JobStateTimeLimitActions).toEqual([
        { Action: 'CANCEL', MaxTimeSeconds: waitSeconds, Reason: CAPACITY_WAIT_REASON, State: 'RUNNABLE' },
        ...unplaceable,
      ]);
    }
  });

  it('never cancels on-demand jobs for capacity, only jobs no instance can hold', () => {
    for (const tier of s.config.tiers) {
      expect(queue(`trainyard-${tier.id}-on-demand`).JobStateTimeLimitActions).toEqual(unplaceable);
    }
  });

  it('schedules every queue fair-share, one share per team weighted from config', () => {
    s.platformTemplate.hasResourceProperties('AWS::Batch::SchedulingPolicy', {
      FairsharePolicy: {
        ShareDistribution: TWO_TEAM_CONFIG.teams.map((t) => ({
          ShareIdentifier: t.id,
          WeightFactor: t.fairShareWeight,
        })),
      },
    });
    for (const [, props] of resourcesOf(s.platformTemplate, 'AWS::Batch::JobQueue')) {
      expect(props.SchedulingPolicyArn).toEqual({ 'Fn::GetAtt': [expect.stringMatching(/^FleetFairShare/), 'Arn'] });
    }
  });
});

describe('CPU tiers on Fargate', () => {
  it('has a Fargate spot and a Fargate on-demand environment', () => {
    const fargate = computeEnvironments().map(([, p]) => computeResources(p).Type);
    expect(fargate.filter((t) => t === 'FARGATE_SPOT')).toHaveLength(1);
    expect(fargate.filter((t) => t === 'FARGATE')).toHaveLength(1);
  });

  it('rounds a tier up to the smallest Fargate size that holds it (0.5 vCPU / 512 MiB → 1024 MiB)', () => {
    const props = jobDefinition('nlp', 'cpu-small');
    expect(props.PlatformCapabilities).toEqual(['FARGATE']);
    expect((props.ContainerProperties as Record<string, unknown>).ResourceRequirements).toEqual(
      expect.arrayContaining([
        { Type: 'MEMORY', Value: '1024' },
        { Type: 'VCPU', Value: '0.5' },
      ]),
    );
  });
});

describe('what Batch can hold of a configuration', () => {
  // One synth: a team whose id has a dash, a cpu tier Fargate rounds up (5 vCPU → 8), and a small one.
  let odd: Synthesized;
  beforeAll(() => {
    odd = synthesize({
      teams: [{ id: 'ml-research', monthlyBudgetUsd: 100 }],
      tiers: [
        {
          id: 'cpu-fat',
          kind: 'cpu',
          vcpus: 5,
          memoryMiB: 10240,
          maxRuntime: '10m',
          onDemandUsdPerHour: 0.4,
          peakTflops: 0.5,
          maxInstances: 1,
        },
        {
          id: 'cpu-tiny',
          kind: 'cpu',
          vcpus: 0.25,
          memoryMiB: 512,
          maxRuntime: '30s',
          onDemandUsdPerHour: 0.01,
          peakTflops: 0.05,
          maxInstances: 4,
        },
      ],
    });
  });

  it('sizes the Fargate pool for the sizes the jobs ask for, so every cpu tier’s job fits it', () => {
    // cpu-fat's jobs ask for 8 vCPU; summed from the configured 5 the pool held 6 and they waited RUNNABLE for ever.
    const fargate = resourcesOf(odd.platformTemplate, 'AWS::Batch::ComputeEnvironment').filter(([, p]) =>
      String(computeResources(p).Type).startsWith('FARGATE'),
    );
    expect(fargate).toHaveLength(2);
    for (const [, p] of fargate) expect(computeResources(p).MaxvCpus).toBe(8 * 1 + 0.25 * 4);
  });

  it('gives Batch an alphanumeric share identifier for a team whose id has a dash', () => {
    // The API reference (ShareAttributes): "limited to 255 alphanumeric characters". prepare-attempt submits each job
    // with the same shareIdentifierOf its team.
    const [[, policy] = ['', {}]] = resourcesOf(odd.platformTemplate, 'AWS::Batch::SchedulingPolicy');
    expect((policy.FairsharePolicy as { ShareDistribution: unknown }).ShareDistribution).toEqual([
      { ShareIdentifier: shareIdentifierOf('ml-research'), WeightFactor: 1 },
    ]);
    expect(shareIdentifierOf('ml-research')).toBe('mlresearch');
  });
});

describe('GPU launch templates', () => {
  const launchTemplates = () => resourcesOf(s.platformTemplate, 'AWS::EC2::LaunchTemplate');
  const data = (p: Record<string, unknown>) => p.LaunchTemplateData as Record<string, unknown>;
  // The MIME envelope is a Fn::Join whose shell part is itself an Fn::Base64 of the script: flatten the literals.
  const literals = (node: unknown): string => {
    if (typeof node === 'string') return node;
    if (Array.isArray(node)) return node.map(literals).join('');
    if (node && typeof node === 'object') return Object.values(node).map(literals).join('');
    return '';
  };
  const userData = (p: Record<string, unknown>) => literals(data(p).UserData);

  it('has one launch template per GPU tier', () => {
    expect(launchTemplates()).toHaveLength(gpuTiers().length);
  });

  it('requires IMDSv2 with hop limit 2 so containers can read spot notices', () => {
    for (const [, props] of launchTemplates()) {
      expect(data(props).MetadataOptions).toEqual({
        HttpEndpoint: 'enabled',
        HttpPutResponseHopLimit: 2,
        HttpTokens: 'required',
      });
    }
  });

  it('resolves the ECS GPU-optimised AMI from SSM at deploy time', () => {
    const parameters = s.platformTemplate.toJSON().Parameters as Record<string, { Default?: string; Type: string }>;
    const ami = Object.values(parameters).find((p) => p.Default === ECS_AL2023_GPU_AMI_PARAMETER);
    expect(ami?.Type).toBe('AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>');
  });

  it('encrypts a gp3 root volume sized for large images', () => {
    for (const [, props] of launchTemplates()) {
      expect(data(props).BlockDeviceMappings).toEqual([
        {
          DeviceName: '/dev/xvda',
          Ebs: { DeleteOnTermination: true, Encrypted: true, VolumeSize: 200, VolumeType: 'gp3' },
        },
      ]);
    }
  });

  it('raises the ECS container stop timeout so a checkpoint fits inside the 2-minute spot warning', () => {
    for (const [, props] of launchTemplates()) {
      const match = /ECS_CONTAINER_STOP_TIMEOUT=(\d+)s/.exec(userData(props));
      expect(Number(match?.[1])).toBeGreaterThanOrEqual(90);
      expect(Number(match?.[1])).toBeLessThan(120);
    }
  });

  it('takes an instance out of service when nvidia-smi fails at boot', () => {
    for (const [, props] of launchTemplates()) {
      expect(userData(props)).toMatch(
        /if ! timeout 120 nvidia-smi[^\n]*\n[\s\S]*systemctl disable --now ecs\.service[\s\S]*shutdown -h now/,
      );
      expect(data(props).InstanceInitiatedShutdownBehavior).toBe('terminate');
    }
  });
});

describe('job definitions', () => {
  it('has one job definition per team and tier', () => {
    expect(resourcesOf(s.platformTemplate, 'AWS::Batch::JobDefinition')).toHaveLength(
      TWO_TEAM_CONFIG.teams.length * s.config.tiers.length,
    );
  });

  it('requests each GPU tier’s GPUs, vCPUs and memory', () => {
    for (const tier of singleNodeGpuTiers()) {
      const container = jobDefinition('vision', tier.id).ContainerProperties as Record<string, unknown>;
      expect(container.ResourceRequirements).toEqual([
        { Type: 'MEMORY', Value: String(tier.memoryMiB) },
        { Type: 'VCPU', Value: String(tier.vcpus) },
        { Type: 'GPU', Value: String(tier.gpus) },
      ]);
    }
  });

  it('gives GPU containers a large /dev/shm (half the memory unless the tier says otherwise)', () => {
    for (const tier of singleNodeGpuTiers()) {
      const container = jobDefinition('nlp', tier.id).ContainerProperties as Record<string, unknown>;
      expect(container.LinuxParameters).toEqual({
        InitProcessEnabled: true,
        SharedMemorySize: Math.floor(tier.memoryMiB / 2),
      });
    }
  });

  it('runs the multi-node tier as a multi-node parallel job over all its nodes', () => {
    const multi = gpuTiers().find((t) => t.nodes > 1) as TierConfig;
    const props = jobDefinition('nlp', multi.id);
    expect(props.Type).toBe('multinode');
    expect(props.NodeProperties).toMatchObject({
      MainNode: 0,
      NumNodes: multi.nodes,
      NodeRangeProperties: [{ TargetNodes: `0:${multi.nodes - 1}` }],
    });
  });

  it('times each attempt out at the tier’s max runtime (Batch minimum 60 s)', () => {
    for (const tier of s.config.tiers) {
      expect(jobDefinition('nlp', tier.id).Timeout).toEqual({
        AttemptDurationSeconds: Math.max(60, maxRuntimeSeconds(tier)),
      });
    }
  });

  it('lets Batch retry only infrastructure failures; every other exit (spot reclaims too) goes to the lifecycle', () => {
    const strategy = jobDefinition('nlp', 'gpu-small').RetryStrategy as {
      EvaluateOnExit: Array<Record<string, string>>;
    };
    const retried = strategy.EvaluateOnExit.filter((e) => e.Action === 'RETRY');
    expect(retried.map((e) => e.OnReason ?? e.OnStatusReason)).toEqual([
      'CannotPullContainerError:*',
      'CannotStartContainerError*',
      'ResourceInitializationError*',
      'DockerTimeoutError*',
    ]);
    expect(strategy.EvaluateOnExit.at(-1)).toEqual({ Action: 'EXIT', OnStatusReason: '*' });
  });

  it('logs through awslogs to a log group with the configured retention', () => {
    const container = jobDefinition('nlp', 'gpu-small').ContainerProperties as Record<string, unknown>;
    expect(container.LogConfiguration).toMatchObject({
      LogDriver: 'awslogs',
      Options: { 'awslogs-group': { Ref: expect.stringMatching(/^JobDefinitionsTrainingLogs/) } },
    });
    s.platformTemplate.hasResourceProperties('AWS::Logs::LogGroup', { RetentionInDays: s.config.logRetentionDays });
  });
});

describe('table grants across the two stacks', () => {
  type Statement = { Action: string | string[]; Resource: unknown };
  const statements = () =>
    resourcesOf(s.platformTemplate, 'AWS::IAM::Policy').flatMap(
      ([, p]) => (p.PolicyDocument as { Statement: Statement[] }).Statement,
    );
  const listed = <T>(v: T | T[]) => (Array.isArray(v) ? v : [v]);

  const queriesOn = (tableArn: unknown) =>
    statements().filter(
      (st) =>
        listed(st.Action).includes('dynamodb:Query') &&
        listed(st.Resource).some((r) => JSON.stringify(r) === JSON.stringify(tableArn)),
    );

  it('grants every function that may query the jobs table its indexes too', () => {
    const tableArn = { 'Fn::ImportValue': 'Trainyard-Stateful-JobsTableArn' };
    expect(queriesOn(tableArn).length).toBeGreaterThanOrEqual(3);
    for (const st of queriesOn(tableArn)) {
      expect(listed(st.Resource)).toContainEqual({ 'Fn::Join': ['', [tableArn, '/index/*']] });
    }
  });

  it('grants only the four DynamoDB operations the stores send, and no write to the functions that only read', () => {
    // lambdas/shared/dynamo.ts sends GetItem, Query, PutItem and UpdateItem; nothing scans, batches or deletes.
    const sent = new Set(['dynamodb:GetItem', 'dynamodb:Query', 'dynamodb:PutItem', 'dynamodb:UpdateItem']);
    const dynamoActions = statements()
      .flatMap((st) => listed(st.Action))
      .filter((a) => a.startsWith('dynamodb:'));
    expect(dynamoActions.length).toBeGreaterThan(20);
    expect([...new Set(dynamoActions.filter((a) => !sent.has(a)))]).toEqual([]);
    // Readers of the budgets table that never write it: PrepareAttempt and AttemptOutcome (a blocked scope) only.
    const budgetsArn = JSON.stringify({ 'Fn::ImportValue': 'Trainyard-Stateful-BudgetsTableArn' });
    const writersOfBudgets = resourcesOf(s.platformTemplate, 'AWS::IAM::Policy')
      .filter(([, p]) =>
        (p.PolicyDocument as { Statement: Statement[] }).Statement.some(
          (st) =>
            listed(st.Action).some((a) => a === 'dynamodb:PutItem' || a === 'dynamodb:UpdateItem') &&
            listed(st.Resource).some((r) => JSON.stringify(r) === budgetsArn),
        ),
      )
      .map(([, p]) => JSON.stringify(p.Roles));
    expect(writersOfBudgets.join()).not.toMatch(/PrepareAttempt|AttemptOutcome/);
    expect(writersOfBudgets.join()).toMatch(/ApiHandler/);
  });

  it('lets exactly the API and budget-watch, which list a team’s budgets, query the budgets table’s byTeam index', () => {
    const tableArn = { 'Fn::ImportValue': 'Trainyard-Stateful-BudgetsTableArn' };
    const byTeam = { 'Fn::Join': ['', [tableArn, '/index/byTeam']] };
    const holders = resourcesOf(s.platformTemplate, 'AWS::IAM::Policy')
      .filter(([, p]) =>
        (p.PolicyDocument as { Statement: Statement[] }).Statement.some(
          (st) =>
            listed(st.Action).includes('dynamodb:Query') &&
            listed(st.Resource).some((r) => JSON.stringify(r) === JSON.stringify(byTeam)),
        ),
      )
      .map(([, p]) => JSON.stringify(p.Roles));
    expect(holders).toHaveLength(2);
    expect(holders.join()).toMatch(/ApiHandler/);
    expect(holders.join()).toMatch(/BudgetWatch/);
    // No function reaches the budgets table's indexes through a wildcard.
    const wildcard = { 'Fn::Join': ['', [tableArn, '/index/*']] };
    expect(statements().filter((st) => JSON.stringify(st.Resource).includes(JSON.stringify(wildcard)))).toEqual([]);
  });
});

describe('team job roles', () => {
  const rolePolicy = (team: string) => {
    const role = resourcesOf(s.platformTemplate, 'AWS::IAM::Role').find(([id]) =>
      id.startsWith(`JobDefinitionsTeamRolesTeam${team}`),
    );
    if (!role) throw new Error(`no role for ${team}`);
    const policy = resourcesOf(s.platformTemplate, 'AWS::IAM::Policy').find(([, p]) =>
      JSON.stringify(p.Roles).includes(role[0]),
    );
    if (!policy) throw new Error(`no policy for ${team}`);
    return (policy[1].PolicyDocument as { Statement: Array<Record<string, unknown>> }).Statement;
  };
  const bucketArn = { 'Fn::ImportValue': 'Trainyard-Stateful-WorkspaceBucketArn' };

  it.each(['nlp', 'vision'])('confines team %s objects to its own prefix', (team) => {
    expect(rolePolicy(team)).toContainEqual({
      Sid: 'TeamPrefixObjects',
      Effect: 'Allow',
      Action: ['s3:AbortMultipartUpload', 's3:DeleteObject', 's3:GetObject', 's3:PutObject'],
      Resource: { 'Fn::Join': ['', [bucketArn, `/teams/${team}/*`]] },
    });
  });

  it.each(['nlp', 'vision'])('lets team %s list only its own prefix', (team) => {
    expect(rolePolicy(team)).toContainEqual({
      Sid: 'TeamPrefixListing',
      Effect: 'Allow',
      Action: 's3:ListBucket',
      Resource: bucketArn,
      Condition: { StringLike: { 's3:prefix': [`teams/${team}/*`] } },
    });
  });

  it.each(['nlp', 'vision'])('has no other permissions for team %s', (team) => {
    expect(rolePolicy(team)).toHaveLength(2);
  });

  it('gives each team’s job definitions that team’s role', () => {
    const roleRef = (team: string, tier: string) =>
      JSON.stringify((jobDefinition(team, tier).ContainerProperties as Record<string, unknown>).JobRoleArn);
    expect(roleRef('nlp', 'gpu-small')).toMatch(/JobDefinitionsTeamRolesTeamnlp/);
    expect(roleRef('vision', 'gpu-small')).toMatch(/JobDefinitionsTeamRolesTeamvision/);
  });
});

describe('network', () => {
  it('logs VPC flows', () => {
    s.platformTemplate.hasResourceProperties('AWS::EC2::FlowLog', {
      TrafficType: 'ALL',
      LogDestinationType: 'cloud-watch-logs',
    });
  });

  it("strips every rule from the new VPC's default security group, which no compute environment uses", () => {
    const [vpcId] = resourcesOf(s.platformTemplate, 'AWS::EC2::VPC').map(([id]) => id);
    s.platformTemplate.hasResourceProperties('Custom::VpcRestrictDefaultSG', {
      DefaultSecurityGroupId: { 'Fn::GetAtt': [vpcId, 'DefaultSecurityGroup'] },
    });
    const groups = resourcesOf(s.platformTemplate, 'AWS::Batch::ComputeEnvironment').flatMap(
      ([, p]) => computeResources(p).SecurityGroupIds as unknown[],
    );
    expect(groups.length).toBeGreaterThan(0);
    expect(JSON.stringify(groups)).not.toContain('DefaultSecurityGroup');
  });

  it('routes S3 traffic through a gateway endpoint, not the NAT', () => {
    s.platformTemplate.hasResourceProperties('AWS::EC2::VPCEndpoint', {
      ServiceName: { 'Fn::Join': ['', ['com.amazonaws.', { Ref: 'AWS::Region' }, '.s3']] },
      VpcEndpointType: 'Gateway',
    });
  });

  it('spreads compute over two zones by count, and over up to three named zones with a NAT gateway each', () => {
    const computeSubnets = (t: typeof s.platformTemplate) =>
      resourcesOf(t, 'AWS::EC2::Subnet').filter(([, p]) => p.MapPublicIpOnLaunch === false);
    expect(computeSubnets(s.platformTemplate)).toHaveLength(2);
    const named = synthesize({
      ...TWO_TEAM_CONFIG,
      network: { mode: 'new', availabilityZones: ['eu-west-1a', 'eu-west-1b', 'eu-west-1c'], natGateways: 3 },
    });
    const subnets = computeSubnets(named.platformTemplate);
    expect(subnets.map(([, p]) => p.AvailabilityZone).sort()).toEqual(['eu-west-1a', 'eu-west-1b', 'eu-west-1c']);
    expect(subnets.map(([, p]) => p.CidrBlock).sort()).toEqual(['10.0.128.0/18', '10.0.192.0/18', '10.0.64.0/18']);
    named.platformTemplate.resourceCountIs('AWS::EC2::NatGateway', 3);
  });

  it('uses an existing VPC and its subnets when configured, creating none', () => {
    const existing = synthesize({
      ...TWO_TEAM_CONFIG,
      network: { mode: 'existing', vpcId: 'vpc-0123456789abcdef0', subnetIds: ['subnet-0123456789abcdef0'] },
    });
    existing.platformTemplate.resourceCountIs('AWS::EC2::VPC', 0);
    // Another VPC's default security group is its owner's to restrict, not ours.
    existing.platformTemplate.resourceCountIs('Custom::VpcRestrictDefaultSG', 0);
    const [, props] = resourcesOf(existing.platformTemplate, 'AWS::Batch::ComputeEnvironment')[0] ?? [];
    expect(computeResources(props as Record<string, unknown>).Subnets).toEqual(['subnet-0123456789abcdef0']);
  });
});

describe('events and alerts', () => {
  it('has the platform’s own event bus', () => {
    s.platformTemplate.resourceCountIs('AWS::Events::EventBus', 1);
  });

  it('subscribes the configured e-mail addresses to the alert topic', () => {
    s.platformTemplate.hasResourceProperties('AWS::SNS::Subscription', {
      Protocol: 'email',
      Endpoint: 'leads@example.com',
    });
  });

  it('lets only the account’s CloudWatch alarms publish to the alert topic through its policy, which it replaces', () => {
    const policies = resourcesOf(s.platformTemplate, 'AWS::SNS::TopicPolicy').map(([, p]) => p);
    expect(policies).toHaveLength(1);
    const policy = policies[0] as Record<string, unknown>;
    const statements = (policy.PolicyDocument as { Statement: Array<Record<string, unknown>> }).Statement;
    const publishers = statements
      .filter((st) => st.Effect === 'Allow' && st.Action === 'sns:Publish')
      .map((st) => (st.Principal as { Service?: string }).Service);
    // No statement for the EventBridge service: any account's rule naming the topic could use it. The alert rule
    // publishes through a role of its own.
    expect(publishers).toEqual(['cloudwatch.amazonaws.com']);
    const alarms = statements.find(
      (st) => (st.Principal as { Service?: string }).Service === 'cloudwatch.amazonaws.com',
    );
    expect(alarms?.Condition).toMatchObject({ StringEquals: { 'aws:SourceAccount': expect.anything() } });
    // Every alarm with an action notifies this topic, so each of them now can.
    const alarmActions = resourcesOf(s.platformTemplate, 'AWS::CloudWatch::Alarm').flatMap(
      ([, p]) => (p.AlarmActions as unknown[] | undefined) ?? [],
    );
    expect(alarmActions.length).toBeGreaterThan(0);
    expect(new Set(alarmActions.map((a) => JSON.stringify(a)))).toEqual(
      new Set((policy.Topics as unknown[]).map((t) => JSON.stringify(t))),
    );
  });

  it('routes budget and failure events to the topic with a dead-letter queue', () => {
    s.platformTemplate.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: {
        source: ['trainyard'],
        'detail-type': Match.arrayWith(['Budget Threshold Crossed', 'Job Failed']),
      },
      Targets: [
        Match.objectLike({
          Arn: { Ref: Match.stringLikeRegexp('EventsAlertTopic') },
          DeadLetterConfig: Match.anyValue(),
          RoleArn: Match.anyValue(),
        }),
      ],
    });
  });

  it('gives every alert the summary line its event carries', () => {
    // A built event, put through each alert target's input transformer as EventBridge applies it: every <name> in
    // the template becomes the value at its JSON path.
    const detail = JSON.parse(
      buildEvent('Budget Exhausted', {
        occurredAt: '2026-11-20T16:05:00Z',
        team: 'vision',
        scope: 'team:vision',
        period: '2026-11',
        limitUsd: 500,
        spentUsd: 500.5,
        reservedUsd: 0,
        pausedJobIds: ['job-1'],
      }).Detail,
    );
    const event = { source: 'trainyard', 'detail-type': 'Budget Exhausted', detail };
    const at = (path: string): unknown =>
      path
        .replace(/^\$\./, '')
        .split('.')
        .reduce<unknown>((value, key) => (value as Record<string, unknown> | undefined)?.[key], event);
    const transformers = resourcesOf(s.platformTemplate, 'AWS::Events::Rule')
      .filter(([, props]) => JSON.stringify(props).includes('Budget Exhausted'))
      .flatMap(([, props]) => (props.Targets as Array<{ InputTransformer?: Record<string, unknown> }>) ?? [])
      .map((target) => target.InputTransformer as { InputPathsMap: Record<string, string>; InputTemplate: string });
    const messages = transformers.map(({ InputPathsMap, InputTemplate }) =>
      JSON.parse(InputTemplate.replace(/<([\w-]+)>/g, (_, name: string) => String(at(InputPathsMap[name] ?? '')))),
    );

    const line = `Trainyard: Budget Exhausted — ${detail.summary}`;
    expect(detail.summary).toMatch(/^Budget team:vision for 2026-11 is exhausted: \$500.50 spent/);
    expect(messages).toEqual([line, { text: line }]);
    for (const detailType of ALERTING_DETAIL_TYPES) expect(EVENT_SCHEMAS[detailType].shape).toHaveProperty('summary');
  });

  it('alarms when an alert could not be delivered', () => {
    s.platformTemplate.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [
        { Name: 'QueueName', Value: { 'Fn::GetAtt': [Match.stringLikeRegexp('EventsAlertDeadLetters'), 'QueueName'] } },
      ],
      ComparisonOperator: 'GreaterThanThreshold',
      Threshold: 0,
    });
    // Kept as long as the handlers' dead letters: SQS's default of 4 days would drop a weekend's failed alerts, and
    // the alarm would clear with them.
    const [queue] = resourcesOf(s.platformTemplate, 'AWS::SQS::Queue').filter(([id]) =>
      /EventsAlertDeadLetters/.test(id),
    );
    expect(queue?.[1]).toMatchObject({ MessageRetentionPeriod: 1_209_600 });
  });

  it('posts to Slack through an API destination whose URL comes from the named secret', () => {
    s.platformTemplate.hasResourceProperties('AWS::Events::ApiDestination', {
      InvocationEndpoint: '{{resolve:secretsmanager:trainyard/slack-webhook:SecretString:::}}',
      HttpMethod: 'POST',
    });
  });

  it('creates no Slack delivery when no secret is configured', () => {
    const noSlack = synthesize({ teams: TWO_TEAM_CONFIG.teams });
    noSlack.platformTemplate.resourceCountIs('AWS::Events::ApiDestination', 0);
    noSlack.platformTemplate.resourceCountIs('AWS::Events::Connection', 0);
  });
});

describe('what the control-plane functions may read in the workspace', () => {
  type Statement = { Action: string | string[]; Resource: unknown; Condition?: unknown };
  const listed = <T>(v: T | T[]) => (Array.isArray(v) ? v : [v]);
  const policies = () =>
    resourcesOf(s.platformTemplate, 'AWS::IAM::Policy').map(
      ([id, p]) => [id, (p.PolicyDocument as { Statement: Statement[] }).Statement] as const,
    );
  const statementsOf = (prefix: string) => {
    const found = policies().find(([id]) => id.startsWith(prefix));
    if (!found) throw new Error(`no policy ${prefix}`);
    return found[1];
  };
  /** The object key patterns (after the bucket's ARN) a policy's statements allow GetObject on. */
  const readable = (statements: readonly Statement[]) =>
    statements
      .filter((st) => listed(st.Action).some((a) => a.startsWith('s3:GetObject')))
      .flatMap((st) => listed(st.Resource))
      .map((r) => /"(\/[^"]*)"\]\]\}$/.exec(JSON.stringify(r))?.[1] ?? JSON.stringify(r))
      .sort();

  it.each([
    { fn: 'Analyze', policy: 'LifecycleStepsAnalyze', keys: ['/teams/*/jobs/*/code.tar.gz'] },
    {
      fn: 'PrepareAttempt',
      policy: 'LifecycleStepsPrepareAttempt',
      keys: ['/teams/*/jobs/*/checkpoints/*/MANIFEST.json'],
    },
    { fn: 'AttemptOutcome', policy: 'LifecycleStepsAttemptOutcome', keys: ['/teams/*/jobs/*/metrics/progress.json'] },
    {
      fn: 'budget-watch',
      policy: 'EventHandlersBudgetWatch',
      keys: ['/teams/*/jobs/*/metrics/progress.json'],
    },
  ])('$fn reads only the objects its code reads', ({ policy, keys }) => {
    expect(readable(statementsOf(policy))).toEqual(keys);
  });

  it('lets the lifecycle steps and event handlers list the bucket only under teams/', () => {
    const listing = policies()
      .filter(([id]) => id.startsWith('LifecycleSteps') || id.startsWith('EventHandlers'))
      .flatMap(([, statements]) => statements.filter((st) => listed(st.Action).some((a) => a.startsWith('s3:List'))));
    expect(listing.length).toBeGreaterThanOrEqual(7);
    for (const st of listing) {
      expect(listed(st.Action)).toEqual(['s3:ListBucket']);
      expect(st.Condition).toEqual({ StringLike: { 's3:prefix': ['teams/*'] } });
    }
  });
});
