import { Annotations, Duration } from 'aws-cdk-lib';
import * as batch from 'aws-cdk-lib/aws-batch';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import type * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { queueName } from '../../lambdas/domain/batch-names';
import { UNPLACEABLE_REASONS, UNPLACEABLE_WAIT_SECONDS } from '../../lambdas/domain/batch-reasons';
import { SPOT_PROBE_MIN_INSTANCE_TYPES, spotProbeCanAnswer } from '../../lambdas/domain/placement';
import type { TierConfig } from '../config';
import { fargateSizeFor, GPU_INSTANCES } from '../instance-catalog';
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
 * A GPU tier's capacity: its launch template, a spot compute environment (price-capacity-optimised over exactly the
 * tier's instance types) and an on-demand one (the tier's first type, the one its on-demand price is for), with one
 * queue for each. The spot queue cancels a job stuck waiting for capacity after `capacityWait`, so the lifecycle can
 * move it on-demand. Multi-node tiers get on-demand only. A spot tier with fewer than three distinct types gets a
 * synth warning: the placement-score probe cannot see spot for it (ADR 0001).
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
    // On-demand runs only the first type, whose price the tier states; spot may place an attempt on any listed type
    // (each attempt is charged the spot price of the type and AZ it landed on).
    const onDemandTypes = tier.instanceTypes.slice(0, 1);
    const warmVcpus = props.warmVcpus ?? 0;
    const onDemandMaxvCpus = maxvCpusFor(tier, onDemandTypes);
    if (warmVcpus > onDemandMaxvCpus) {
      throw new Error(
        `warmCapacity.${tier.id} is ${warmVcpus} vCPUs but the tier's on-demand environment holds at most ${onDemandMaxvCpus} (maxInstances ${tier.maxInstances} of ${onDemandTypes.join(', ')}); lower it or raise maxInstances`,
      );
    }
    if (tier.spotAllowed && !spotProbeCanAnswer(tier.instanceTypes)) {
      Annotations.of(this).addWarningV2(
        'trainyard:spot-probe-blind',
        `Tier ${tier.id} lists ${new Set(tier.instanceTypes).size} distinct instance type(s); EC2 spot placement scores need ${SPOT_PROBE_MIN_INSTANCE_TYPES} to answer, so a deadline job that falls back to on-demand on this tier cannot see spot return and stays on on-demand (docs/adr/0001-spot-placement-policy.md). List ${SPOT_PROBE_MIN_INSTANCE_TYPES} or more interchangeable types.`,
      );
    }
    const common = {
      vpc: props.network.vpc,
      vpcSubnets: props.network.subnets,
      securityGroups: [tier.nodes > 1 ? this.nodesSecurityGroup(props.network) : props.network.securityGroup],
      instanceRole: props.instanceRole,
      launchTemplate,
      images: [{ imageType: batch.EcsMachineImageType.ECS_AL2023_NVIDIA }],
      useOptimalInstanceClasses: false,
      updateToLatestImageVersion: true,
    };
    if (tier.spotAllowed) {
      const spot = new batch.ManagedEc2EcsComputeEnvironment(this, 'Spot', {
        ...common,
        instanceTypes: tier.instanceTypes.map((t) => new ec2.InstanceType(t)),
        maxvCpus: maxvCpusFor(tier, tier.instanceTypes),
        spot: true,
        allocationStrategy: batch.AllocationStrategy.SPOT_PRICE_CAPACITY_OPTIMIZED,
        minvCpus: 0,
      });
      followLaunchTemplate(spot, launchTemplate);
      this.spotQueue = new batch.JobQueue(this, 'SpotQueue', {
        jobQueueName: queueName(props.namePrefix, tier.id, 'spot'),
        priority: 1,
        schedulingPolicy: props.schedulingPolicy,
        computeEnvironments: [{ computeEnvironment: spot, order: 1 }],
        jobStateTimeLimitActions: [capacityWaitAction(props.capacityWait), ...unplaceableActions()],
      });
    }
    const onDemand = new batch.ManagedEc2EcsComputeEnvironment(this, 'OnDemand', {
      ...common,
      instanceTypes: onDemandTypes.map((t) => new ec2.InstanceType(t)),
      maxvCpus: onDemandMaxvCpus,
      spot: false,
      allocationStrategy: batch.AllocationStrategy.BEST_FIT_PROGRESSIVE,
      minvCpus: warmVcpus,
    });
    followLaunchTemplate(onDemand, launchTemplate);
    this.onDemandQueue = new batch.JobQueue(this, 'OnDemandQueue', {
      jobQueueName: queueName(props.namePrefix, tier.id, 'on-demand'),
      priority: 1,
      schedulingPolicy: props.schedulingPolicy,
      computeEnvironments: [{ computeEnvironment: onDemand, order: 1 }],
      jobStateTimeLimitActions: unplaceableActions(),
    });
  }

  /**
   * A multi-node tier's own security group. Batch runs multi-node jobs in awsvpc mode, each node's container on a
   * network interface with the compute environment's security groups, and the nodes of one job must reach each other
   * (torchrun's rendezvous on the main node, NCCL between all): all traffic from the group itself is let in, nothing
   * from anywhere else. Single-node tiers keep the shared group, which lets nothing in.
   */
  private nodesSecurityGroup(network: TierCapacityProps['network']): ec2.SecurityGroup {
    const group = new ec2.SecurityGroup(this, 'NodesSecurityGroup', {
      vpc: network.vpc,
      description: 'Trainyard multi-node training: the nodes of a job reach each other; nothing else comes in',
      allowAllOutbound: true,
    });
    group.addIngressRule(group, ec2.Port.allTraffic(), 'Nodes of one multi-node job (rendezvous, NCCL)');
    return group;
  }
}

/**
 * Names the launch template's latest version in the compute environment. Without a version, Batch keeps the one it
 * resolved when the environment was created, so a new ECS GPU AMI or a changed boot script would never reach an
 * instance; with it, every template change changes the environment, and Batch rolls its instances in an
 * infrastructure update (running attempts get 30 minutes, Batch's default, then are stopped and resume from their
 * checkpoint).
 */
function followLaunchTemplate(environment: batch.ManagedEc2EcsComputeEnvironment, template: ec2.LaunchTemplate): void {
  (environment.node.defaultChild as batch.CfnComputeEnvironment).addPropertyOverride(
    'ComputeResources.LaunchTemplate.Version',
    template.latestVersionNumber,
  );
}

/**
 * maxvCpus for `maxInstances` jobs of `nodes` instances each, of the smallest of `types`: Batch counts the instance's
 * vCPUs, not the job's, and a job takes a whole instance (one per GPU set), so this is the cap under which no mix of
 * types runs more than `maxInstances` jobs at once. Where Batch picks larger types, fewer run.
 */
function maxvCpusFor(tier: TierConfig, types: readonly string[]): number {
  const instanceVcpus = Math.max(tier.vcpus, Math.min(...types.map((t) => GPU_INSTANCES[t]?.vcpus ?? tier.vcpus)));
  return Math.ceil(instanceVcpus * tier.nodes * tier.maxInstances);
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
    // Each job asks Fargate for its tier's size rounded up to one Fargate offers (job-definitions.ts), which is what
    // maxvCpus must hold: summed from the configured vCPUs, a tier rounded up (5 vCPU → 8) never fitted and waited
    // RUNNABLE until the queue cancelled it.
    const maxvCpus = Math.max(
      1,
      Math.ceil(
        props.tiers.reduce(
          (sum, tier) => sum + (fargateSizeFor(tier.vcpus, tier.memoryMiB)?.vcpus ?? tier.vcpus) * tier.maxInstances,
          0,
        ),
      ),
    );
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
            jobStateTimeLimitActions: [capacityWaitAction(props.capacityWait), ...unplaceableActions()],
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
          jobStateTimeLimitActions: unplaceableActions(),
        }),
      );
    }
  }
}

/**
 * Cancel a job Batch says it can never place (UNPLACEABLE_REASONS) after 10 minutes RUNNABLE, on every queue: without
 * it an on-demand job that no instance can hold would wait for ever, blocking its queue.
 */
function unplaceableActions(): batch.JobStateTimeLimitAction[] {
  const reasons: Record<(typeof UNPLACEABLE_REASONS)[number], batch.JobStateTimeLimitActionsReason> = {
    'MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT': batch.JobStateTimeLimitActionsReason.JOB_RESOURCE_REQUIREMENT,
    'MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE':
      batch.JobStateTimeLimitActionsReason.COMPUTE_ENVIRONMENT_MAX_RESOURCE,
  };
  return UNPLACEABLE_REASONS.map((reason) => ({
    action: batch.JobStateTimeLimitActionsAction.CANCEL,
    maxTime: Duration.seconds(UNPLACEABLE_WAIT_SECONDS),
    reason: reasons[reason],
    state: batch.JobStateTimeLimitActionsState.RUNNABLE,
  }));
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
