/**
 * The ports on AWS: thin SDK adapters for Batch, Step Functions, EventBridge, CloudWatch Logs, ECS and EC2.
 */
import { BatchClient, TerminateJobCommand } from '@aws-sdk/client-batch';
import { CloudWatchLogsClient, GetLogEventsCommand, ResourceNotFoundException } from '@aws-sdk/client-cloudwatch-logs';
import { DescribeInstancesCommand, DescribeSpotPriceHistoryCommand, EC2Client } from '@aws-sdk/client-ec2';
import { DescribeContainerInstancesCommand, ECSClient } from '@aws-sdk/client-ecs';
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { ExecutionAlreadyExists, SendTaskSuccessCommand, SFNClient, StartExecutionCommand } from '@aws-sdk/client-sfn';
import type { EventEntry } from '../domain/events';
import { spotPriceAt } from '../domain/metering';
import type { BatchControl, EventPublisher, FleetFacts, InstanceFacts, LifecycleControl, LogReader } from './ports';

/** Raised when PutEvents rejects entries (it reports failures per entry, not as an exception). */
export class EventDeliveryFailed extends Error {
  override name = 'EventDeliveryFailed';
}

/** TerminateJob. */
export function awsBatchControl(client = new BatchClient({})): BatchControl {
  return {
    async terminateJob(batchJobId, reason) {
      await client.send(new TerminateJobCommand({ jobId: batchJobId, reason }));
    },
  };
}

/** PutEvents on the platform bus, 10 entries per call (the API's limit). */
export function awsEventPublisher(busName: string, client = new EventBridgeClient({})): EventPublisher {
  return {
    async publish(entries: readonly EventEntry[]) {
      for (let i = 0; i < entries.length; i += 10) {
        const batch = entries.slice(i, i + 10).map((e) => ({ ...e, EventBusName: busName }));
        const out = await client.send(new PutEventsCommand({ Entries: batch }));
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
export function awsLifecycleControl(stateMachineArn: () => string, client = new SFNClient({})): LifecycleControl {
  return {
    async startExecution(name, input) {
      try {
        await client.send(
          new StartExecutionCommand({ stateMachineArn: stateMachineArn(), name, input: JSON.stringify(input) }),
        );
        return { alreadyStarted: false };
      } catch (error) {
        if (error instanceof ExecutionAlreadyExists || (error as Error).name === 'ExecutionAlreadyExists') {
          return { alreadyStarted: true };
        }
        throw error;
      }
    },
    async sendTaskSuccess(taskToken, output) {
      await client.send(new SendTaskSuccessCommand({ taskToken, output: JSON.stringify(output) }));
    },
  };
}

/** GetLogEvents from the end of an attempt's stream. */
export function awsLogReader(logGroupName: string, client = new CloudWatchLogsClient({})): LogReader {
  return {
    async recentLines(logStreamName, limit) {
      try {
        const out = await client.send(
          new GetLogEventsCommand({ logGroupName, logStreamName, limit, startFromHead: false }),
        );
        return (out.events ?? []).map((e) => e.message ?? '');
      } catch (error) {
        if (error instanceof ResourceNotFoundException || (error as Error).name === 'ResourceNotFoundException')
          return [];
        throw error;
      }
    },
  };
}

/** ECS container instance → EC2 instance facts; spot price history at a moment. */
export function awsFleetFacts(ecs = new ECSClient({}), ec2 = new EC2Client({})): FleetFacts {
  return {
    async instanceFor(containerInstanceArn) {
      // arn:aws:ecs:<region>:<account>:container-instance/<cluster>/<id> — the cluster is in the ARN.
      const cluster = /:container-instance\/([^/]+)\/[^/]+$/.exec(containerInstanceArn)?.[1];
      if (!cluster) return undefined;
      const described = await ecs.send(
        new DescribeContainerInstancesCommand({ cluster, containerInstances: [containerInstanceArn] }),
      );
      const instanceId = described.containerInstances?.[0]?.ec2InstanceId;
      if (!instanceId) return undefined;
      const instances = await ec2.send(new DescribeInstancesCommand({ InstanceIds: [instanceId] }));
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
      const out = await ec2.send(
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
  };
}
