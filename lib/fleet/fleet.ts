import { Duration } from 'aws-cdk-lib';
import * as batch from 'aws-cdk-lib/aws-batch';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { shareIdentifierOf } from '../../lambdas/domain/batch-names';
import type { TrainyardConfig } from '../config';
import { acknowledgeFinding } from '../nag';
import { CpuTierCapacity, GpuTierCapacity } from './tier-capacity';

/** Props for the fleet. */
export interface FleetProps {
  /** Tiers, teams (fair shares), spot policy and warm capacity from config. */
  readonly config: TrainyardConfig;
  /** Where compute launches. */
  readonly network: { vpc: ec2.IVpc; subnets: ec2.SubnetSelection; securityGroup: ec2.ISecurityGroup };
  /** Prefix of queue names. */
  readonly namePrefix: string;
}

/**
 * All training capacity: per GPU tier a spot and an on-demand compute environment and queue, Fargate spot and
 * on-demand for the CPU tiers, and one fair-share scheduling policy (a share per team) on every queue.
 */
export class Fleet extends Construct {
  /** Every queue the platform submits to (for least-privilege grants). */
  public readonly queues: batch.IJobQueue[] = [];
  /** The fair-share policy. */
  public readonly schedulingPolicy: batch.FairshareSchedulingPolicy;

  constructor(scope: Construct, id: string, props: FleetProps) {
    super(scope, id);
    const { config } = props;
    this.schedulingPolicy = new batch.FairshareSchedulingPolicy(this, 'FairShare', {
      shareDecay: Duration.hours(1),
      shares: config.teams.map((team) => ({
        shareIdentifier: shareIdentifierOf(team.id),
        weightFactor: team.fairShareWeight,
      })),
    });
    const capacityWait = Duration.minutes(config.spotPolicy.capacityWaitMinutes);

    const gpuTiers = config.tiers.filter((t) => t.kind === 'gpu');
    if (gpuTiers.length > 0) {
      const instanceRole = new iam.Role(this, 'GpuInstanceRole', {
        assumedBy: new iam.ServicePrincipal('ec2.amazonaws.com'),
        description: 'ECS agent on Trainyard GPU instances',
        managedPolicies: [
          iam.ManagedPolicy.fromAwsManagedPolicyName('service-role/AmazonEC2ContainerServiceforEC2Role'),
        ],
      });
      acknowledgeFinding(
        instanceRole,
        'IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonEC2ContainerServiceforEC2Role]',
        'The documented policy for ECS container instances (Batch compute environments); AWS keeps it in step with the ECS agent.',
      );
      for (const tier of gpuTiers) {
        const capacity = new GpuTierCapacity(this, `Tier-${tier.id}`, {
          tier,
          network: props.network,
          instanceRole,
          schedulingPolicy: this.schedulingPolicy,
          capacityWait,
          warmVcpus: config.warmCapacity[tier.id],
          namePrefix: props.namePrefix,
        });
        if (capacity.spotQueue) this.queues.push(capacity.spotQueue);
        this.queues.push(capacity.onDemandQueue);
      }
    }

    const cpuTiers = config.tiers.filter((t) => t.kind === 'cpu');
    if (cpuTiers.length > 0) {
      const cpu = new CpuTierCapacity(this, 'CpuTiers', {
        tiers: cpuTiers,
        network: props.network,
        schedulingPolicy: this.schedulingPolicy,
        capacityWait,
        namePrefix: props.namePrefix,
      });
      this.queues.push(...cpu.spotQueues.values(), ...cpu.onDemandQueues.values());
    }
  }
}
