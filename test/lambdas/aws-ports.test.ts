/**
 * The AWS adapters of the ports, against SDK mocks answering with the documented response shapes (Batch, Step
 * Functions, EventBridge, CloudWatch Logs, ECS and EC2 have no local engine).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { BatchClient, DescribeJobsCommand, ListJobsCommand, TerminateJobCommand } from '@aws-sdk/client-batch';
import {
  CloudWatchLogsClient,
  GetLogEventsCommand,
  InvalidParameterException,
  ResourceNotFoundException,
} from '@aws-sdk/client-cloudwatch-logs';
import {
  DescribeInstancesCommand,
  DescribeSpotPriceHistoryCommand,
  DescribeSubnetsCommand,
  EC2Client,
  EC2ServiceException,
  GetSpotPlacementScoresCommand,
} from '@aws-sdk/client-ec2';
import { DescribeContainerInstancesCommand, ECSClient } from '@aws-sdk/client-ecs';
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { ExecutionAlreadyExists, SendTaskSuccessCommand, SFNClient, StartExecutionCommand } from '@aws-sdk/client-sfn';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { buildEvent } from '../../lambdas/domain/events';
import {
  awsBatchControl,
  awsEventPublisher,
  awsFleetFacts,
  awsLifecycleControl,
  awsLogReader,
  EventDeliveryFailed,
} from '../../lambdas/shared/aws-ports';
import { InvalidLogPosition } from '../../lambdas/shared/ports';

const batch = mockClient(BatchClient);
const bridge = mockClient(EventBridgeClient);
const sfn = mockClient(SFNClient);
const logs = mockClient(CloudWatchLogsClient);
const ecs = mockClient(ECSClient);
const ec2 = mockClient(EC2Client);

beforeEach(() => {
  for (const mock of [batch, bridge, sfn, logs, ecs, ec2]) mock.reset();
});

const costReport = (n: number) =>
  buildEvent('Cost Report Ready', {
    report: 'daily',
    periodStart: '2026-11-20',
    periodEnd: '2026-11-20',
    uri: `s3://bucket/reports/${n}.json`,
    totalUsd: n,
    jobs: n,
    occurredAt: '2026-11-21T00:00:00Z',
  });

/** AWS's DescribeJobs answer for a failed Trainyard attempt (test/fixtures/batch). */
const describeJobsFixture = () =>
  JSON.parse(
    readFileSync(
      fileURLToPath(new URL('../fixtures/batch/app-error-exit-1.describe-jobs.json', import.meta.url)),
      'utf8',
    ),
  );

describe('Batch', () => {
  it('terminates a job with the given reason', async () => {
    batch.on(TerminateJobCommand).resolves({});
    await awsBatchControl().terminateJob('4c7599ae', 'Trainyard: cancelled by user');
    expect(batch.commandCalls(TerminateJobCommand)[0]?.args[0].input).toEqual({
      jobId: '4c7599ae',
      reason: 'Trainyard: cancelled by user',
    });
  });

  it('looks a job up by id with DescribeJobs, as the documented JobDetail', async () => {
    const described = describeJobsFixture();
    const id = described.jobs[0].jobId;
    batch.on(DescribeJobsCommand).resolves(described);
    const job = await awsBatchControl().lookupJob?.({ batchJobId: id, queue: 'q', jobName: 'n' });
    expect(job).toMatchObject({
      jobId: id,
      status: 'FAILED',
      attempts: [expect.objectContaining({ stoppedAt: 1763646122000 })],
    });
    expect(batch.commandCalls(ListJobsCommand)).toHaveLength(0);
    expect(batch.commandCalls(DescribeJobsCommand)[0]?.args[0].input).toEqual({ jobs: [id] });
  });

  it('finds a job without a recorded id by name in its queue (the newest, over every page), or none', async () => {
    const described = describeJobsFixture();
    const id = described.jobs[0].jobId;
    const name = described.jobs[0].jobName;
    batch
      .on(ListJobsCommand, { nextToken: undefined })
      .resolves({ jobSummaryList: [{ jobId: 'older', jobName: name, createdAt: 1 }], nextToken: 'page-2' })
      .on(ListJobsCommand, { nextToken: 'page-2' })
      .resolves({ jobSummaryList: [{ jobId: id, jobName: name, createdAt: 2 }] });
    batch.on(DescribeJobsCommand).resolves(described);
    const job = await awsBatchControl().lookupJob?.({ queue: 'trainyard-gpu-small-spot', jobName: name });
    expect(job?.jobId).toBe(id);
    expect(batch.commandCalls(ListJobsCommand)[0]?.args[0].input).toEqual({
      jobQueue: 'trainyard-gpu-small-spot',
      filters: [{ name: 'JOB_NAME', values: [name] }],
      nextToken: undefined,
    });
    expect(batch.commandCalls(DescribeJobsCommand)[0]?.args[0].input).toEqual({ jobs: [id] });

    batch.reset();
    batch.on(ListJobsCommand).resolves({ jobSummaryList: [] });
    expect(await awsBatchControl().lookupJob?.({ queue: 'trainyard-gpu-small-spot', jobName: name })).toBeUndefined();
    expect(batch.commandCalls(DescribeJobsCommand)).toHaveLength(0);
  });

  // The API reference's JobDetail (https://docs.aws.amazon.com/batch/latest/APIReference/API_JobDetail.html) leaves
  // `attempts`, `createdAt` and `jobArn` optional, and AWS's own describe-jobs example
  // (https://docs.aws.amazon.com/code-library/latest/ug/batch_example_batch_DescribeJobs_section.html) answers a
  // SUBMITTED job without `attempts` or `jobArn`.
  it('looks up a just-submitted attempt whose JobDetail has no attempts or jobArn yet', async () => {
    const jobId = 'bcf0b186-a532-4122-842e-2ccab8d54efb';
    batch.on(DescribeJobsCommand).resolves({
      jobs: [
        {
          status: 'SUBMITTED',
          container: {
            mountPoints: [],
            image: '123456789012.dkr.ecr.us-east-1.amazonaws.com/trainyard/pytorch-gpu:2.5.1',
            environment: [],
            command: ['python', 'train.py'],
            volumes: [],
            ulimits: [],
          },
          parameters: {},
          jobDefinition: 'arn:aws:batch:us-east-1:123456789012:job-definition/trainyard-vision-gpu-small:1',
          jobQueue: 'arn:aws:batch:us-east-1:123456789012:job-queue/trainyard-gpu-small-spot',
          jobId,
          dependsOn: [],
          jobName: '01JDA7Q6ZK3V8N2M4P5R6S7T8W-a1',
          createdAt: 1480483387803,
        },
      ],
    } as never);
    // AttemptOutcome, Finalize/execution-ended and budget-watch all reach Batch through this call: a job just
    // submitted is "still queued", not an invalid answer.
    const job = await awsBatchControl().lookupJob?.({
      batchJobId: jobId,
      queue: 'trainyard-gpu-small-spot',
      jobName: '01JDA7Q6ZK3V8N2M4P5R6S7T8W-a1',
    });
    expect(job?.status).toBe('SUBMITTED');
    expect(job?.attempts).toEqual([]);
  });
});

describe('EventBridge', () => {
  it('puts events on the platform bus, ten per call', async () => {
    bridge.on(PutEventsCommand).resolves({ FailedEntryCount: 0, Entries: [] });
    await awsEventPublisher('trainyard-bus').publish(Array.from({ length: 12 }, (_, i) => costReport(i)));
    const calls = bridge.commandCalls(PutEventsCommand).map((c) => c.args[0].input.Entries ?? []);
    expect(calls.map((entries) => entries.length)).toEqual([10, 2]);
    expect(calls.flat().every((e) => e.EventBusName === 'trainyard-bus')).toBe(true);
  });

  it('fails when PutEvents rejects entries, naming the error codes', async () => {
    bridge.on(PutEventsCommand).resolves({
      FailedEntryCount: 1,
      Entries: [{ ErrorCode: 'ThrottlingException', ErrorMessage: 'Rate exceeded' }],
    });
    await expect(awsEventPublisher('trainyard-bus').publish([costReport(1)])).rejects.toThrow(
      new EventDeliveryFailed('PutEvents rejected 1 entries: ThrottlingException: Rate exceeded'),
    );
  });
});

describe('Step Functions', () => {
  it('starts an execution named by the job id with the JSON input', async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: 'arn:x', startDate: new Date() });
    const result = await awsLifecycleControl(() => 'arn:aws:states:us-east-1:1:stateMachine:jobs').startExecution(
      'j1',
      {
        jobId: 'j1',
      },
    );
    expect(result).toEqual({ alreadyStarted: false });
    expect(sfn.commandCalls(StartExecutionCommand)[0]?.args[0].input).toEqual({
      stateMachineArn: 'arn:aws:states:us-east-1:1:stateMachine:jobs',
      name: 'j1',
      input: '{"jobId":"j1"}',
    });
  });

  it('treats an execution that already exists as started (a retried submit)', async () => {
    sfn.on(StartExecutionCommand).rejects(new ExecutionAlreadyExists({ message: 'exists', $metadata: {} }));
    expect(await awsLifecycleControl(() => 'arn:sm').startExecution('j1', {})).toEqual({ alreadyStarted: true });
  });

  it('sends task success with the output as JSON', async () => {
    sfn.on(SendTaskSuccessCommand).resolves({});
    await awsLifecycleControl(() => {
      throw new Error('not needed for task tokens');
    }).sendTaskSuccess('token-1', { action: 'resume' });
    expect(sfn.commandCalls(SendTaskSuccessCommand)[0]?.args[0].input).toEqual({
      taskToken: 'token-1',
      output: '{"action":"resume"}',
    });
  });
});

describe('CloudWatch Logs', () => {
  it('answers no lines and no position for a stream that does not exist yet', async () => {
    logs.on(GetLogEventsCommand).rejects(new ResourceNotFoundException({ message: 'no stream', $metadata: {} }));
    expect(await awsLogReader('training').readLines('nlp/default/none', 'tail', 10)).toEqual({
      lines: [],
      atEnd: true,
    });
  });

  it('reads on from a forward token, from the head, and hands back the token to go on from', async () => {
    logs
      .on(GetLogEventsCommand, { nextToken: 'f/1' })
      .resolves({ events: [{ message: 'same' }, { message: 'same' }], nextForwardToken: 'f/3' });
    const page = await awsLogReader('training').readLines('nlp/default/abc', { after: 'f/1' }, 2);
    expect(page).toEqual({ lines: ['same', 'same'], next: 'f/3', atEnd: false });
    expect(logs.commandCalls(GetLogEventsCommand)[0]?.args[0].input).toEqual({
      logGroupName: 'training',
      logStreamName: 'nlp/default/abc',
      limit: 2,
      startFromHead: true,
      nextToken: 'f/1',
    });
  });

  it('reads past empty pages while the token moves, and is at the end when it comes back unchanged', async () => {
    logs
      .on(GetLogEventsCommand, { nextToken: 'f/1' })
      .resolves({ events: [], nextForwardToken: 'f/2' })
      .on(GetLogEventsCommand, { nextToken: 'f/2' })
      .resolves({ events: [], nextForwardToken: 'f/2' });
    const page = await awsLogReader('training').readLines('nlp/default/abc', { after: 'f/1' }, 10);
    expect(page).toEqual({ lines: [], next: 'f/2', atEnd: true });
    expect(logs.commandCalls(GetLogEventsCommand)).toHaveLength(2);
  });

  it('reads the newest lines for a tail, with the forward token after them', async () => {
    logs.on(GetLogEventsCommand).resolves({ events: [{ message: 'last' }], nextForwardToken: 'f/9' });
    const page = await awsLogReader('training').readLines('nlp/default/abc', 'tail', 1);
    expect(page).toEqual({ lines: ['last'], next: 'f/9', atEnd: true });
    expect(logs.commandCalls(GetLogEventsCommand)[0]?.args[0].input).toMatchObject({ startFromHead: false, limit: 1 });
  });

  it('refuses a token CloudWatch does not take (expired after 24 hours) as an invalid position', async () => {
    logs
      .on(GetLogEventsCommand)
      .rejects(new InvalidParameterException({ message: 'The specified nextToken is invalid.', $metadata: {} }));
    await expect(awsLogReader('training').readLines('nlp/default/abc', { after: 'f/old' }, 5)).rejects.toThrow(
      new InvalidLogPosition('CloudWatch Logs refused the position: The specified nextToken is invalid.'),
    );
  });
});

describe('fleet facts', () => {
  const arn = 'arn:aws:ecs:us-east-1:123456789012:container-instance/trainyard-gpu/0f1e2d3c4b5a';

  it('finds the EC2 instance, type, zone and lifecycle behind a container instance', async () => {
    ecs
      .on(DescribeContainerInstancesCommand)
      .resolves({ containerInstances: [{ ec2InstanceId: 'i-0abc1234def567890' }] });
    ec2.on(DescribeInstancesCommand).resolves({
      Reservations: [
        {
          Instances: [
            {
              InstanceId: 'i-0abc1234def567890',
              InstanceType: 'g4dn.xlarge',
              Placement: { AvailabilityZone: 'us-east-1b' },
              InstanceLifecycle: 'spot',
            },
          ],
        },
      ],
    });
    expect(await awsFleetFacts().instanceFor(arn)).toEqual({
      instanceId: 'i-0abc1234def567890',
      instanceType: 'g4dn.xlarge',
      availabilityZone: 'us-east-1b',
      lifecycle: 'spot',
    });
    expect(ecs.commandCalls(DescribeContainerInstancesCommand)[0]?.args[0].input).toEqual({
      cluster: 'trainyard-gpu',
      containerInstances: [arn],
    });
  });

  it('answers undefined for an ARN without a cluster (nothing is called)', async () => {
    expect(await awsFleetFacts().instanceFor('arn:aws:ecs:us-east-1:1:container-instance/abc')).toBeUndefined();
    expect(ecs.calls()).toHaveLength(0);
  });

  it('prices a spot instance at the price in effect when it started', async () => {
    const start = Date.UTC(2026, 10, 20, 12, 0, 0);
    ec2.on(DescribeSpotPriceHistoryCommand).resolves({
      SpotPriceHistory: [
        {
          SpotPrice: '0.1897',
          Timestamp: new Date(start - 3_600_000),
          InstanceType: 'g4dn.xlarge',
          AvailabilityZone: 'us-east-1b',
        },
        {
          SpotPrice: '0.2100',
          Timestamp: new Date(start + 60_000),
          InstanceType: 'g4dn.xlarge',
          AvailabilityZone: 'us-east-1b',
        },
      ],
    });
    expect(await awsFleetFacts().spotPriceAt('g4dn.xlarge', 'us-east-1b', start)).toBe(0.1897);
  });
});

describe('spot capacity probe (GetSpotPlacementScores)', () => {
  const GPU_TYPES = ['g5.xlarge', 'g4dn.xlarge', 'g6.xlarge'];
  // The function's region comes from its EC2 client (AWS_REGION in Lambda).
  const fleet = () => awsFleetFacts({ ec2: new EC2Client({ region: 'eu-west-1' }) });
  const zone = (id: string, score: number) => ({ Region: 'eu-west-1', AvailabilityZoneId: id, Score: score });

  it('asks for one instance of any of the types, scored per zone of the function’s region', async () => {
    ec2.on(GetSpotPlacementScoresCommand).resolves({ SpotPlacementScores: [zone('euw1-az1', 9)] });
    await fleet().spotCapacityAvailable?.([...GPU_TYPES, 'g4dn.xlarge']);
    expect(ec2.commandCalls(GetSpotPlacementScoresCommand).map((c) => c.args[0].input)).toEqual([
      {
        InstanceTypes: ['g4dn.xlarge', 'g5.xlarge', 'g6.xlarge'],
        TargetCapacity: 1,
        TargetCapacityUnitType: 'units',
        SingleAvailabilityZone: true,
        RegionNames: ['eu-west-1'],
      },
    ]);
  });

  it.each([
    { what: 'the best zone scores exactly the bar', scores: [zone('euw1-az1', 3), zone('euw1-az2', 7)], answer: true },
    { what: 'a zone scores 10', scores: [zone('euw1-az3', 10)], answer: true },
    { what: 'every zone scores under the bar', scores: [zone('euw1-az1', 6), zone('euw1-az2', 1)], answer: false },
    {
      what: 'a high score for another region only',
      scores: [{ ...zone('use1-az1', 10), Region: 'us-east-1' }],
      answer: undefined,
    },
    { what: 'no scores at all', scores: [], answer: undefined },
    {
      what: 'a zone without a score',
      scores: [{ Region: 'eu-west-1', AvailabilityZoneId: 'euw1-az1' }],
      answer: undefined,
    },
  ])('answers $answer when $what', async ({ scores, answer }) => {
    ec2.on(GetSpotPlacementScoresCommand).resolves({ SpotPlacementScores: scores });
    expect(await fleet().spotCapacityAvailable?.(GPU_TYPES)).toBe(answer);
  });

  it.each([
    { name: 'RequestLimitExceeded', message: 'Request limit exceeded.' },
    { name: 'UnauthorizedOperation', message: 'You are not authorized to perform this operation.' },
  ])('answers undefined instead of failing on $name', async ({ name, message }) => {
    ec2
      .on(GetSpotPlacementScoresCommand)
      .rejects(new EC2ServiceException({ name, message, $fault: 'client', $metadata: { httpStatusCode: 400 } }));
    expect(await fleet().spotCapacityAvailable?.(GPU_TYPES)).toBeUndefined();
  });

  describe('scoped to the compute subnets’ zones', () => {
    // The compute launches into euw1-az1 and euw1-az2; spot is plentiful in euw1-az3 only.
    const scoped = () =>
      awsFleetFacts(
        { ec2: new EC2Client({ region: 'eu-west-1' }) },
        { computeSubnetIds: ['subnet-0aaa1111', 'subnet-0bbb2222'] },
      );
    const subnetsIn = () =>
      ec2.on(DescribeSubnetsCommand).resolves({
        Subnets: [
          { SubnetId: 'subnet-0aaa1111', AvailabilityZoneId: 'euw1-az1' },
          { SubnetId: 'subnet-0bbb2222', AvailabilityZoneId: 'euw1-az2' },
        ],
      });

    it('answers by the compute’s zones only, and asks for their zones once', async () => {
      subnetsIn();
      ec2.on(GetSpotPlacementScoresCommand).resolves({
        SpotPlacementScores: [zone('euw1-az1', 2), zone('euw1-az2', 3), zone('euw1-az3', 9)],
      });
      const inCompute = scoped();

      expect(await inCompute.spotCapacityAvailable?.(GPU_TYPES)).toBe(false);
      expect(await inCompute.spotCapacityAvailable?.(GPU_TYPES)).toBe(false);
      expect(ec2.commandCalls(DescribeSubnetsCommand).map((c) => c.args[0].input)).toEqual([
        { SubnetIds: ['subnet-0aaa1111', 'subnet-0bbb2222'] },
      ]);
      // Unscoped, the same scores read as available (the zone the compute cannot use scores 9).
      expect(await fleet().spotCapacityAvailable?.(GPU_TYPES)).toBe(true);
    });

    it('answers available when one of the compute’s zones scores the bar', async () => {
      subnetsIn();
      ec2.on(GetSpotPlacementScoresCommand).resolves({
        SpotPlacementScores: [zone('euw1-az1', 2), zone('euw1-az2', 8)],
      });
      expect(await scoped().spotCapacityAvailable?.(GPU_TYPES)).toBe(true);
    });

    it('answers undefined when the subnets’ zones cannot be read, and asks again at the next probe', async () => {
      ec2
        .on(DescribeSubnetsCommand)
        .rejectsOnce(
          new EC2ServiceException({
            name: 'UnauthorizedOperation',
            message: 'You are not authorized to perform this operation.',
            $fault: 'client',
            $metadata: { httpStatusCode: 403 },
          }),
        )
        .resolves({ Subnets: [{ SubnetId: 'subnet-0aaa1111', AvailabilityZoneId: 'euw1-az1' }] });
      ec2.on(GetSpotPlacementScoresCommand).resolves({ SpotPlacementScores: [zone('euw1-az1', 9)] });
      const inCompute = scoped();

      expect(await inCompute.spotCapacityAvailable?.(GPU_TYPES)).toBeUndefined();
      expect(await inCompute.spotCapacityAvailable?.(GPU_TYPES)).toBe(true);
      expect(ec2.commandCalls(DescribeSubnetsCommand)).toHaveLength(2);
    });
  });

  it('does not ask for fewer than three distinct types, whose score AWS says is always low', async () => {
    expect(await fleet().spotCapacityAvailable?.(['g4dn.xlarge'])).toBeUndefined();
    expect(await fleet().spotCapacityAvailable?.(['g4dn.xlarge', 'g5.xlarge', 'g4dn.xlarge'])).toBeUndefined();
    expect(await fleet().spotCapacityAvailable?.([])).toBeUndefined();
    expect(ec2.commandCalls(GetSpotPlacementScoresCommand)).toHaveLength(0);
  });
});
