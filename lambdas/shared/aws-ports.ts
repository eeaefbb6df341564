/**
 * The ports on AWS: thin SDK adapters for Batch, Step Functions, EventBridge, CloudWatch Logs, ECS and EC2.
 *
 * Each SDK client module is imported the first time its port is used, not when the handler loads: every handler
 * shares this wiring but touches only a few services, and loading them all (EC2's client alone takes ~0.4 s) made
 * every cold start pay for the lot. Dynamic import keeps one module instance, so the clients are the ones tests mock.
 */
import type { BatchClient } from '@aws-sdk/client-batch';
import type { CloudWatchLogsClient, GetLogEventsCommandOutput } from '@aws-sdk/client-cloudwatch-logs';
import type { EC2Client } from '@aws-sdk/client-ec2';
import type { ECSClient } from '@aws-sdk/client-ecs';
import type { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import type { SFNClient } from '@aws-sdk/client-sfn';
import { parseBatchJob } from '../domain/batch-job';
import type { EventEntry } from '../domain/events';
import { spotPriceAt } from '../domain/metering';
import { SPOT_PROBE_MIN_INSTANCE_TYPES, spotProbeCanAnswer } from '../domain/placement';
import { logger } from './logger';
import {
  type BatchControl,
  type EventPublisher,
  type FleetFacts,
  type InstanceFacts,
  InvalidLogPosition,
  type LifecycleControl,
  type LogPage,
  type LogReader,
} from './ports';

/** Raised when PutEvents rejects entries (it reports failures per entry, not as an exception). */
export class EventDeliveryFailed extends Error {
  override name = 'EventDeliveryFailed';
}

/**
 * The lowest spot placement score (1..10) the periodic check reads as "spot capacity is available now". AWS defines
 * only the ends of the scale: 10 means a request is highly likely to succeed, 1 that it is not likely to. A wrong
 * "available" costs a deadline job a restart on spot plus a wait in the spot queue before the policy falls back again
 * (about 2·d + one check interval of slack), while a wrong "unavailable" only keeps it on on-demand for another tick;
 * so the bar sits well above the middle of the scale (5.5), in the part AWS describes as likely to succeed. The
 * policy's return hold (two restart overheads of unbroken sightings) filters scores that only flicker above it.
 */
export const SPOT_SCORE_AVAILABLE = 7;

/** A value built once, on first use. */
function once<T>(make: () => Promise<T>): () => Promise<T> {
  let value: Promise<T> | undefined;
  return () => {
    value ??= make();
    return value;
  };
}

/** TerminateJob; DescribeJobs, and ListJobs by name for an attempt whose Batch job id was never recorded. */
export function awsBatchControl(client?: BatchClient): BatchControl {
  const sdk = once(() => import('@aws-sdk/client-batch'));
  const batch = once(async () => client ?? new (await sdk()).BatchClient({}));
  /** The id of the newest job named `jobName` in `queue` (a name is one attempt's, so there is one in practice). */
  async function idByName(queue: string, jobName: string): Promise<string | undefined> {
    const { ListJobsCommand } = await sdk();
    let newest: { jobId: string; createdAt: number } | undefined;
    let nextToken: string | undefined;
    do {
      const page = await (await batch()).send(
        new ListJobsCommand({ jobQueue: queue, filters: [{ name: 'JOB_NAME', values: [jobName] }], nextToken }),
      );
      for (const summary of page.jobSummaryList ?? []) {
        if (summary.jobName !== jobName || !summary.jobId) continue;
        const createdAt = summary.createdAt ?? 0;
        if (!newest || createdAt > newest.createdAt) newest = { jobId: summary.jobId, createdAt };
      }
      nextToken = page.nextToken;
    } while (nextToken);
    return newest?.jobId;
  }
  return {
    async terminateJob(batchJobId, reason) {
      const { TerminateJobCommand } = await sdk();
      await (await batch()).send(new TerminateJobCommand({ jobId: batchJobId, reason }));
    },
    async lookupJob({ batchJobId, queue, jobName }) {
      const jobId = batchJobId ?? (await idByName(queue, jobName));
      if (jobId === undefined) return undefined;
      const { DescribeJobsCommand } = await sdk();
      const { jobs } = await (await batch()).send(new DescribeJobsCommand({ jobs: [jobId] }));
      const detail = jobs?.find((job) => job.jobId === jobId);
      return detail ? parseBatchJob(detail, `DescribeJobs ${jobId}`) : undefined;
    },
  };
}

/** PutEvents on the platform bus, 10 entries per call (the API's limit). */
export function awsEventPublisher(busName: string, client?: EventBridgeClient): EventPublisher {
  const sdk = once(() => import('@aws-sdk/client-eventbridge'));
  const bridge = once(async () => client ?? new (await sdk()).EventBridgeClient({}));
  return {
    async publish(entries: readonly EventEntry[]) {
      const { PutEventsCommand } = await sdk();
      for (let i = 0; i < entries.length; i += 10) {
        const batch = entries.slice(i, i + 10).map((e) => ({ ...e, EventBusName: busName }));
        const out = await (await bridge()).send(new PutEventsCommand({ Entries: batch }));
        if ((out.FailedEntryCount ?? 0) > 0) {
          const failures = (out.Entries ?? [])
            .filter((e) => e.ErrorCode)
            .map((e) => `${e.ErrorCode}: ${e.ErrorMessage}`);
          throw new EventDeliveryFailed(`PutEvents rejected ${out.FailedEntryCount} entries: ${failures.join('; ')}`);
        }
      }
    },
  };
}

/**
 * StartExecution (idempotent by name) and SendTaskSuccess. The state machine ARN is read only when starting an
 * execution: SendTaskSuccess acts on a token, so the lifecycle's own pause step can use this without a circular
 * reference to the state machine that invokes it.
 */
export function awsLifecycleControl(stateMachineArn: () => string, client?: SFNClient): LifecycleControl {
  const sdk = once(() => import('@aws-sdk/client-sfn'));
  const sfn = once(async () => client ?? new (await sdk()).SFNClient({}));
  return {
    async startExecution(name, input) {
      const { StartExecutionCommand } = await sdk();
      try {
        await (await sfn()).send(
          new StartExecutionCommand({ stateMachineArn: stateMachineArn(), name, input: JSON.stringify(input) }),
        );
        return { alreadyStarted: false };
      } catch (error) {
        if ((error as Error).name === 'ExecutionAlreadyExists') return { alreadyStarted: true };
        throw error;
      }
    },
    async sendTaskSuccess(taskToken, output) {
      const { SendTaskSuccessCommand } = await sdk();
      await (await sfn()).send(new SendTaskSuccessCommand({ taskToken, output: JSON.stringify(output) }));
    },
  };
}

/** GetLogEvents from the end of an attempt's stream. */
export function awsLogReader(logGroupName: string, client?: CloudWatchLogsClient): LogReader {
  const sdk = once(() => import('@aws-sdk/client-cloudwatch-logs'));
  const logs = once(async () => client ?? new (await sdk()).CloudWatchLogsClient({}));
  return {
    async readLines(logStreamName, start, limit): Promise<LogPage> {
      const { GetLogEventsCommand } = await sdk();
      let token = typeof start === 'object' ? start.after : undefined;
      for (let reads = 1; ; reads++) {
        let out: GetLogEventsCommandOutput;
        try {
          out = await (await logs()).send(
            new GetLogEventsCommand({
              logGroupName,
              logStreamName,
              limit,
              // A forward token must be read with startFromHead (GetLogEvents' rule).
              startFromHead: start !== 'tail',
              ...(token !== undefined && { nextToken: token }),
            }),
          );
        } catch (error) {
          const name = (error as Error).name;
          if (name === 'ResourceNotFoundException')
            return { lines: [], ...(token !== undefined && { next: token }), atEnd: true };
          if (name === 'InvalidParameterException' && token !== undefined) {
            throw new InvalidLogPosition(`CloudWatch Logs refused the position: ${(error as Error).message}`);
          }
          throw error;
        }
        const lines = (out.events ?? []).map((e) => e.message ?? '');
        const next = out.nextForwardToken ?? token;
        // At the end of the stream GetLogEvents hands back the token it was given. It may also answer an empty page
        // with a new token while events lie beyond it (it pages by time), so such a page is read past, a few times.
        const atEnd = lines.length === 0 && next === token;
        if (lines.length > 0 || start === 'tail' || atEnd || reads >= EMPTY_LOG_PAGES_READ_PAST) {
          return { lines, ...(next !== undefined && { next }), atEnd: start === 'tail' || atEnd };
        }
        token = next;
      }
    },
  };
}

/** Empty GetLogEvents pages with a new token read past before a read answers "nothing yet". */
const EMPTY_LOG_PAGES_READ_PAST = 5;

/** Where the fleet's compute runs, for the spot probe. */
export interface FleetFactsOptions {
  /**
   * The subnets the compute environments launch into: the spot probe scores only their Availability Zones (a zone the
   * instances cannot launch in says nothing of their capacity). @default - every zone of the region
   */
  readonly computeSubnetIds?: readonly string[];
}

/**
 * ECS container instance → EC2 instance facts; spot price history at a moment; spot capacity now, from EC2's spot
 * placement scores (GetSpotPlacementScores: one instance of any of the types, scored per Availability Zone of the
 * client's region, of the compute subnets' zones when they are given; available when the best of those zones scores
 * at least {@link SPOT_SCORE_AVAILABLE}).
 */
export function awsFleetFacts(
  clients: { ecs?: ECSClient; ec2?: EC2Client } = {},
  options: FleetFactsOptions = {},
): FleetFacts {
  const ecsSdk = once(() => import('@aws-sdk/client-ecs'));
  const ec2Sdk = once(() => import('@aws-sdk/client-ec2'));
  const ecs = once(async () => clients.ecs ?? new (await ecsSdk()).ECSClient({}));
  const ec2 = once(async () => clients.ec2 ?? new (await ec2Sdk()).EC2Client({}));
  // The compute subnets' zone ids, asked once (a failed ask is asked again at the next probe); none given: any zone.
  const subnetIds = options.computeSubnetIds ?? [];
  let computeZones: Promise<Set<string>> | undefined;
  const computeZoneIds = async (): Promise<Set<string> | undefined> => {
    if (subnetIds.length === 0) return undefined;
    computeZones ??= (async () => {
      const { DescribeSubnetsCommand } = await ec2Sdk();
      const out = await (await ec2()).send(new DescribeSubnetsCommand({ SubnetIds: [...subnetIds] }));
      const zones = new Set((out.Subnets ?? []).flatMap((s) => (s.AvailabilityZoneId ? [s.AvailabilityZoneId] : [])));
      if (zones.size === 0) throw new Error(`DescribeSubnets gave no zone for subnets ${subnetIds.join(', ')}`);
      return zones;
    })();
    try {
      return await computeZones;
    } catch (error) {
      computeZones = undefined;
      throw error;
    }
  };
  return {
    async instanceFor(containerInstanceArn) {
      // arn:aws:ecs:<region>:<account>:container-instance/<cluster>/<id> — the cluster is in the ARN.
      const cluster = /:container-instance\/([^/]+)\/[^/]+$/.exec(containerInstanceArn)?.[1];
      if (!cluster) return undefined;
      const { DescribeContainerInstancesCommand } = await ecsSdk();
      const described = await (await ecs()).send(
        new DescribeContainerInstancesCommand({ cluster, containerInstances: [containerInstanceArn] }),
      );
      const instanceId = described.containerInstances?.[0]?.ec2InstanceId;
      if (!instanceId) return undefined;
      const { DescribeInstancesCommand } = await ec2Sdk();
      const instances = await (await ec2()).send(new DescribeInstancesCommand({ InstanceIds: [instanceId] }));
      const instance = instances.Reservations?.[0]?.Instances?.[0];
      if (!instance?.InstanceType || !instance.Placement?.AvailabilityZone) return undefined;
      const facts: InstanceFacts = {
        instanceId,
        instanceType: instance.InstanceType,
        availabilityZone: instance.Placement.AvailabilityZone,
        lifecycle: instance.InstanceLifecycle === 'spot' ? 'spot' : 'on-demand',
      };
      return facts;
    },
    async spotPriceAt(instanceType, availabilityZone, atMs) {
      const { DescribeSpotPriceHistoryCommand } = await ec2Sdk();
      const out = await (await ec2()).send(
        new DescribeSpotPriceHistoryCommand({
          InstanceTypes: [instanceType as never],
          AvailabilityZone: availabilityZone,
          ProductDescriptions: ['Linux/UNIX'],
          StartTime: new Date(atMs - 6 * 3600_000),
          EndTime: new Date(atMs),
        }),
      );
      const history = (out.SpotPriceHistory ?? []).flatMap((p) =>
        p.SpotPrice && p.Timestamp ? [{ usdPerHour: Number(p.SpotPrice), timestampMs: p.Timestamp.getTime() }] : [],
      );
      return spotPriceAt(history, atMs);
    },
    async spotCapacityAvailable(instanceTypes) {
      const types = [...new Set(instanceTypes)].sort();
      if (!spotProbeCanAnswer(types)) {
        // Asking would spend a request configuration on a score AWS documents as always low: it says nothing.
        logger.info('spot placement score not requested: too few instance types to be meaningful', {
          instanceTypes: types,
          minimum: SPOT_PROBE_MIN_INSTANCE_TYPES,
        });
        return undefined;
      }
      try {
        const { GetSpotPlacementScoresCommand } = await ec2Sdk();
        const client = await ec2();
        const region = await client.config.region();
        const out = await client.send(
          new GetSpotPlacementScoresCommand({
            InstanceTypes: types,
            TargetCapacity: 1,
            TargetCapacityUnitType: 'units',
            SingleAvailabilityZone: true,
            RegionNames: [region],
          }),
        );
        const zones = await computeZoneIds();
        const scores = (out.SpotPlacementScores ?? []).flatMap((s) =>
          typeof s.Score === 'number' &&
          (s.Region === undefined || s.Region === region) &&
          (zones === undefined || (s.AvailabilityZoneId !== undefined && zones.has(s.AvailabilityZoneId)))
            ? [s.Score]
            : [],
        );
        return scores.length === 0 ? undefined : Math.max(...scores) >= SPOT_SCORE_AVAILABLE;
      } catch (error) {
        // Throttling, AccessDenied, an unresolved region: the check goes on without knowing (the job stays put).
        const e = error as Error;
        logger.warn('spot placement score request failed; spot availability unknown this tick', {
          instanceTypes: types,
          error: `${e.name}: ${e.message}`,
        });
        return undefined;
      }
    },
  };
}
