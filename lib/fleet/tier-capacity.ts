import type { Duration } from 'aws-cdk-lib';
import * as batch from 'aws-cdk-lib/aws-batch';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import type * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { queueName } from '../../lambdas/domain/batch-names';
import type { TierConfig } from '../config';
import { GPU_INSTANCES } from '../instance-catalog';
import { GpuLaunchTemplate } from './gpu-launch-template';

/** What every tier's capacity needs from the fleet around it. */
export interface TierCapacityProps {
  /** The tier. */
  readonly tier: TierConfig;
  /** VPC, subnets and security group the compute launches into. */
  readonly network: { vpc: ec2.IVpc; subnets: ec2.SubnetSelection; securityGroup: ec2.ISecurityGroup };
  /** Instance role for the GPU instances (ECS agent). */
  readonly instanceRole: iam.IRole;
  /** The fair-share policy shared by every queue: one share per team. */
  readonly schedulingPolicy: batch.ISchedulingPolicy;
  /** How long a spot job may wait for capacity before the queue cancels it. */
  readonly capacityWait: Duration;
  /** vCPUs kept running in the on-demand environment. @default - 0 (no warm capacity) */
  readonly warmVcpus?: number;
  /** Prefix of queue names. */
  readonly namePrefix: string;
}

/**
 * A GPU tier's capacity: its launch template, a spot compute environment (price-capacity-optimised, exactly the
 * tier's instance types) and an on-demand one, with one queue for each. The spot queue cancels a job stuck waiting
 * for capacity after `capacityWait`, so the lifecycle can move it on-demand. Multi-node tiers get on-demand only.
 */
export class GpuTierCapacity extends Construct {
  /** Queue feeding spot capacity; undefined when the tier doesn't allow spot. */
  public readonly spotQueue?: batch.JobQueue;
  /** Queue feeding on-demand capacity. */
  public readonly onDemandQueue: batch.JobQueue;

  constructor(scope: Construct, id: string, props: TierCapacityProps) {
    super(scope, id);
    const { tier } = props;
    const launchTemplate = new GpuLaunchTemplate(this, 'LaunchTemplate').launchTemplate;
    // Batch counts the instance's vCPUs, not the job's, against maxvCpus.
    const instanceVcpus = Math.max(tier.vcpus, ...tier.instanceTypes.map((t) => GPU_INSTANCES[t]?.vcpus ?? 0));
    const maxvCpus = Math.ceil(instanceVcpus * tier.nodes * tier.maxInstances);
    const warmVcpus = props.warmVcpus ?? 0;
    if (warmVcpus > maxvCpus) {
      throw new Error(
        `warmCapacity.${tier.id} is ${warmVcpus} vCPUs but the tier's on-demand environment holds at most ${maxvCpus} (maxInstances ${tier.maxInstances} × ${instanceVcpus} vCPUs); lower it or raise maxInstances`,
      );
    }
    const common = {
      vpc: props.network.vpc,
      vpcSubnets: props.network.subnets,
      securityGroups: [props.network.securityGroup],
      instanceRole: props.instanceRole,
      launchTemplate,
      images: [{ imageType: batch.EcsMachineImageType.ECS_AL2023_NVIDIA }],
      instanceTypes: tier.instanceTypes.map((t) => new ec2.InstanceType(t)),
      useOptimalInstanceClasses: false,
      updateToLatestImageVersion: true,
      maxvCpus,
    };
    if (tier.spotAllowed) {
      const spot = new batch.ManagedEc2EcsComputeEnvironment(this, 'Spot', {
        ...common,
        spot: true,
        allocationStrategy: batch.AllocationStrategy.SPOT_PRICE_CAPACITY_OPTIMIZED,
        minvCpus: 0,
      });
      this.spotQueue = new batch.JobQueue(this, 'SpotQueue', {
        jobQueueName: queueName(props.namePrefix, tier.id, 'spot'),
        priority: 1,
        schedulingPolicy: props.schedulingPolicy,
        computeEnvironments: [{ computeEnvironment: spot, order: 1 }],
        jobStateTimeLimitActions: [capacityWaitAction(props.capacityWait)],
      });
    }
    const onDemand = new batch.ManagedEc2EcsComputeEnvironment(this, 'OnDemand', {
      ...common,
      spot: false,
      allocationStrategy: batch.AllocationStrategy.BEST_FIT_PROGRESSIVE,
      minvCpus: warmVcpus,
    });
    this.onDemandQueue = new batch.JobQueue(this, 'OnDemandQueue', {
      jobQueueName: queueName(props.namePrefix, tier.id, 'on-demand'),
      priority: 1,
      schedulingPolicy: props.schedulingPolicy,
      computeEnvironments: [{ computeEnvironment: onDemand, order: 1 }],
    });
  }
}

/** Fargate capacity shared by the CPU tiers, with a spot and an on-demand queue per CPU tier. */
export class CpuTierCapacity extends Construct {
  /** Spot queue by CPU tier id (tiers that allow spot). */
  public readonly spotQueues = new Map<string, batch.JobQueue>();
  /** On-demand queue by CPU tier id. */
  public readonly onDemandQueues = new Map<string, batch.JobQueue>();

  constructor(
    scope: Construct,
    id: string,
    props: Omit<TierCapacityProps, 'tier' | 'instanceRole' | 'warmVcpus'> & { tiers: readonly TierConfig[] },
  ) {
    super(scope, id);
    const maxvCpus = Math.max(1, Math.ceil(props.tiers.reduce((sum, tier) => sum + tier.vcpus * tier.maxInstances, 0)));
    const common = {
      vpc: props.network.vpc,
      vpcSubnets: props.network.subnets,
      securityGroups: [props.network.securityGroup],
      maxvCpus,
    };
    const spot = new batch.FargateComputeEnvironment(this, 'FargateSpot', { ...common, spot: true });
    const onDemand = new batch.FargateComputeEnvironment(this, 'FargateOnDemand', { ...common, spot: false });
    for (const tier of props.tiers) {
      if (tier.spotAllowed) {
        this.spotQueues.set(
          tier.id,
          new batch.JobQueue(this, `${tier.id}-SpotQueue`, {
            jobQueueName: queueName(props.namePrefix, tier.id, 'spot'),
            priority: 1,
            schedulingPolicy: props.schedulingPolicy,
            computeEnvironments: [{ computeEnvironment: spot, order: 1 }],
            jobStateTimeLimitActions: [capacityWaitAction(props.capacityWait)],
          }),
        );
      }
      this.onDemandQueues.set(
        tier.id,
        new batch.JobQueue(this, `${tier.id}-OnDemandQueue`, {
          jobQueueName: queueName(props.namePrefix, tier.id, 'on-demand'),
          priority: 1,
          schedulingPolicy: props.schedulingPolicy,
          computeEnvironments: [{ computeEnvironment: onDemand, order: 1 }],
        }),
      );
    }
  }
}

/** Cancel a job that has sat RUNNABLE at the head of the spot queue for `wait`: spot capacity isn't coming. */
function capacityWaitAction(wait: Duration): batch.JobStateTimeLimitAction {
  return {
    action: batch.JobStateTimeLimitActionsAction.CANCEL,
    maxTime: wait,
    reason: batch.JobStateTimeLimitActionsReason.INSUFFICIENT_INSTANCE_CAPACITY,
    state: batch.JobStateTimeLimitActionsState.RUNNABLE,
  };
}
