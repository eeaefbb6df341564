import * as ec2 from 'aws-cdk-lib/aws-ec2';
import { Construct } from 'constructs';
import { CONTAINER_STOP_TIMEOUT_SECONDS } from './stop-timeout';

/** SSM parameter with the current ECS-optimised Amazon Linux 2023 NVIDIA AMI; resolved at deploy time. */
export const ECS_AL2023_GPU_AMI_PARAMETER = '/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/recommended/image_id';

/** Props for a GPU launch template. */
export interface GpuLaunchTemplateProps {
  /** Root volume size; images with CUDA and PyTorch are large, and checkpoints are staged locally. */
  readonly rootVolumeGiB?: number;
}

/**
 * Launch template for a GPU tier's instances: the ECS GPU-optimised AMI from SSM, IMDSv2 only with hop limit 2
 * (containers must reach IMDS to see spot notices), an encrypted gp3 root volume, and user data that raises the ECS
 * stop timeout and takes the instance out of service if its GPUs don't answer nvidia-smi at boot.
 */
export class GpuLaunchTemplate extends Construct {
  /** The launch template. */
  public readonly launchTemplate: ec2.LaunchTemplate;

  constructor(scope: Construct, id: string, props: GpuLaunchTemplateProps = {}) {
    super(scope, id);
    // Batch requires MIME multi-part user data in launch templates; it merges its own ECS configuration part.
    const userData = new ec2.MultipartUserData();
    const script = ec2.UserData.forLinux();
    script.addCommands(...gpuBootCommands());
    userData.addUserDataPart(script, ec2.MultipartBody.SHELL_SCRIPT, true);
    this.launchTemplate = new ec2.LaunchTemplate(this, 'LaunchTemplate', {
      machineImage: ec2.MachineImage.fromSsmParameter(ECS_AL2023_GPU_AMI_PARAMETER),
      userData,
      requireImdsv2: true,
      httpTokens: ec2.LaunchTemplateHttpTokens.REQUIRED,
      httpPutResponseHopLimit: 2,
      httpEndpoint: true,
      instanceInitiatedShutdownBehavior: ec2.InstanceInitiatedShutdownBehavior.TERMINATE,
      blockDevices: [
        {
          deviceName: '/dev/xvda',
          volume: ec2.BlockDeviceVolume.ebs(props.rootVolumeGiB ?? 200, {
            volumeType: ec2.EbsDeviceVolumeType.GP3,
            encrypted: true,
            deleteOnTermination: true,
          }),
        },
      ],
    });
  }
}

/** The boot script: ECS agent settings, then a GPU health check that retires a broken instance. */
export function gpuBootCommands(): string[] {
  return [
    'set -euo pipefail',
    'cat >> /etc/ecs/ecs.config <<EOF',
    `ECS_CONTAINER_STOP_TIMEOUT=${CONTAINER_STOP_TIMEOUT_SECONDS}s`,
    'ECS_ENABLE_SPOT_INSTANCE_DRAINING=true',
    'ECS_ENABLE_GPU_SUPPORT=true',
    'EOF',
    // A GPU that fails nvidia-smi would fail every job placed on it: keep the ECS agent from registering and shut
    // the instance down (the launch template terminates on shutdown), so Batch replaces it.
    'if ! timeout 120 nvidia-smi > /var/log/trainyard-gpu-check.log 2>&1; then',
    '  echo "trainyard: nvidia-smi failed at boot; taking this instance out of service" | tee -a /var/log/trainyard-gpu-check.log',
    '  systemctl disable --now ecs.service || true',
    '  shutdown -h now',
    'fi',
  ];
}
