import * as path from 'node:path';
import * as ecrAssets from 'aws-cdk-lib/aws-ecr-assets';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import { Construct } from 'constructs';

/** The repository's images/ folder: the build context of both training images (they COPY harness/). */
export const IMAGES_DIRECTORY = path.join(import.meta.dirname, '..', '..', 'images');

/**
 * The GPU and CPU training images, built from images/ by `cdk deploy` (synth only stages the context; no Docker
 * engine is needed to synthesize) and pushed to the training image repository that the platform stack's
 * synthesizer names.
 */
export class TrainingImages extends Construct {
  /** PyTorch + CUDA image with the harness as entry point. */
  public readonly gpu: ecs.ContainerImage;
  /** CPU PyTorch image with the harness as entry point. */
  public readonly cpu: ecs.ContainerImage;
  /** The underlying assets (their repository is the one images are pulled from). */
  public readonly assets: readonly ecrAssets.DockerImageAsset[];

  constructor(scope: Construct, id: string) {
    super(scope, id);
    const asset = (assetId: string, file: string) =>
      new ecrAssets.DockerImageAsset(this, assetId, {
        directory: IMAGES_DIRECTORY,
        file,
        platform: ecrAssets.Platform.LINUX_AMD64,
        exclude: ['**/__pycache__', '**/.pytest_cache', 'harness/tests'],
      });
    const gpu = asset('Gpu', 'pytorch-gpu/Dockerfile');
    const cpu = asset('Cpu', 'cpu/Dockerfile');
    this.gpu = ecs.ContainerImage.fromDockerImageAsset(gpu);
    this.cpu = ecs.ContainerImage.fromDockerImageAsset(cpu);
    this.assets = [gpu, cpu];
  }
}
