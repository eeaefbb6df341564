import { Duration, Size } from 'aws-cdk-lib';
import * as batch from 'aws-cdk-lib/aws-batch';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import type * as iam from 'aws-cdk-lib/aws-iam';
import type * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { jobDefinitionName, logStreamPrefix } from '../../lambdas/domain/batch-names';
import { maxRuntimeSeconds, type TierConfig } from '../config';
import { fargateSizeFor } from '../instance-catalog';

/** Props for a team's job definitions. */
export interface TeamJobDefinitionsProps {
  /** The team. */
  readonly teamId: string;
  /** Every tier (one definition each). */
  readonly tiers: readonly TierConfig[];
  /** The team's job role, confined to its workspace prefix. */
  readonly jobRole: iam.IRole;
  /** Pulls images and writes logs. */
  readonly executionRole: iam.IRole;
  /** The GPU training image (harness entry point). */
  readonly gpuImage: ecs.ContainerImage;
  /** The CPU training image (harness entry point). */
  readonly cpuImage: ecs.ContainerImage;
  /** Where job output goes. */
  readonly logGroup: logs.ILogGroup;
  /** Whether Fargate tasks need a public IP (no NAT gateway). */
  readonly assignPublicIp: boolean;
  /** Prefix of job definition names. */
  readonly namePrefix: string;
}

/**
 * Batch-level retries cover infrastructure failures only (the image didn't pull, the container didn't start);
 * everything else, spot reclaims included, exits to the lifecycle, which owns spot and application retries.
 * Batch retries when no condition matches, so the last one catches every other status reason.
 */
export const INFRA_RETRY_ATTEMPTS = 3;
function infraOnlyRetries(): batch.RetryStrategy[] {
  return [
    batch.RetryStrategy.of(batch.Action.RETRY, batch.Reason.CANNOT_PULL_CONTAINER),
    batch.RetryStrategy.of(batch.Action.RETRY, batch.Reason.custom({ onReason: 'CannotStartContainerError*' })),
    batch.RetryStrategy.of(batch.Action.RETRY, batch.Reason.custom({ onStatusReason: 'ResourceInitializationError*' })),
    batch.RetryStrategy.of(batch.Action.RETRY, batch.Reason.custom({ onReason: 'DockerTimeoutError*' })),
    batch.RetryStrategy.of(batch.Action.EXIT, batch.Reason.custom({ onStatusReason: '*' })),
  ];
}

/** Shared memory for a GPU container: PyTorch DataLoader workers exchange batches through /dev/shm. */
export function shmSizeMiB(tier: TierConfig): number {
  return tier.shmSizeMiB ?? Math.floor(tier.memoryMiB / 2);
}

/**
 * A team's job definitions, one per tier: the tier's GPUs, vCPUs, memory and shared memory, the team's job role,
 * awslogs with retention, a timeout of the tier's max runtime, infrastructure-only Batch retries, tags propagated.
 */
export class TeamJobDefinitions extends Construct {
  /** Job definition by tier id. */
  public readonly byTier = new Map<string, batch.IJobDefinition>();

  constructor(scope: Construct, id: string, props: TeamJobDefinitionsProps) {
    super(scope, id);
    const logging = ecs.LogDriver.awsLogs({ logGroup: props.logGroup, streamPrefix: logStreamPrefix(props.teamId) });
    for (const tier of props.tiers) {
      const common = {
        jobDefinitionName: jobDefinitionName(props.namePrefix, props.teamId, tier.id),
        // Batch's minimum attempt duration is 60 s: on a tier under 1m a job may run up to 60 s (the config
        // reference says so).
        timeout: Duration.seconds(Math.max(60, maxRuntimeSeconds(tier))),
        propagateTags: true,
      };
      const retries = { retryAttempts: INFRA_RETRY_ATTEMPTS, retryStrategies: infraOnlyRetries() };
      if (tier.kind === 'cpu') {
        const size = fargateSizeFor(tier.vcpus, tier.memoryMiB);
        if (!size) throw new Error(`tier ${tier.id}: no Fargate size for ${tier.vcpus} vCPU / ${tier.memoryMiB} MiB`);
        this.byTier.set(
          tier.id,
          new batch.EcsJobDefinition(this, tier.id, {
            ...common,
            ...retries,
            container: new batch.EcsFargateContainerDefinition(this, `${tier.id}-Container`, {
              image: props.cpuImage,
              cpu: size.vcpus,
              memory: Size.mebibytes(size.memoryMiB),
              jobRole: props.jobRole,
              executionRole: props.executionRole,
              logging,
              assignPublicIp: props.assignPublicIp,
              fargatePlatformVersion: ecs.FargatePlatformVersion.LATEST,
            }),
          }),
        );
        continue;
      }
      const container = new batch.EcsEc2ContainerDefinition(this, `${tier.id}-Container`, {
        image: props.gpuImage,
        cpu: tier.vcpus,
        memory: Size.mebibytes(tier.memoryMiB),
        gpu: tier.gpus,
        jobRole: props.jobRole,
        executionRole: props.executionRole,
        logging,
        linuxParameters: new batch.LinuxParameters(this, `${tier.id}-Linux`, {
          sharedMemorySize: Size.mebibytes(shmSizeMiB(tier)),
          initProcessEnabled: true,
        }),
      });
      if (tier.nodes > 1) {
        // Multi-node parallel jobs: every node runs the same container; node 0 is the main node.
        this.byTier.set(
          tier.id,
          new batch.MultiNodeJobDefinition(this, tier.id, {
            ...common,
            ...retries,
            mainNode: 0,
            containers: [{ container, startNode: 0, endNode: tier.nodes - 1 }],
          }),
        );
      } else {
        this.byTier.set(tier.id, new batch.EcsJobDefinition(this, tier.id, { ...common, ...retries, container }));
      }
    }
  }
}
