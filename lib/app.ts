import { App, DefaultStackSynthesizer } from 'aws-cdk-lib';
import type { TrainyardConfig } from './config';
import { CDK_FEATURE_FLAGS } from './feature-flags';
import { PlatformStack } from './platform-stack';
import { StatefulStack } from './stateful-stack';

/** The two stacks of a Trainyard deployment. */
export interface TrainyardStacks {
  /** Buckets, tables, image repository: retained. */
  readonly stateful: StatefulStack;
  /** Network, compute, lifecycle, API, events: replaceable. */
  readonly platform: PlatformStack;
}

/** Stack names and the physical names derived from them, for one deployment. */
export const DEPLOYMENT_NAMES = {
  stateful: 'Trainyard-Stateful',
  platform: 'Trainyard-Platform',
  /** Batch queue and job definition names start with this. */
  batchPrefix: 'trainyard',
  /** The training image repository (the platform stack's image assets are published there). */
  imageRepository: 'trainyard-training-images',
} as const;

/** A new CDK app with Trainyard's feature flags (feature-flags.ts) and the given context. */
export function createApp(context: Record<string, unknown> = {}): App {
  return new App({ context: { ...CDK_FEATURE_FLAGS, ...context } });
}

/** Adds Trainyard's stacks to an app (environment-agnostic: no lookups, no account or region needed to synth). */
export function addTrainyardStacks(app: App, config: TrainyardConfig): TrainyardStacks {
  const stateful = new StatefulStack(app, DEPLOYMENT_NAMES.stateful, {
    description: 'Trainyard stateful resources: workspace bucket, jobs and budgets tables, training images',
    imageRepositoryName: DEPLOYMENT_NAMES.imageRepository,
    terminationProtection: true,
  });
  const platform = new PlatformStack(app, DEPLOYMENT_NAMES.platform, {
    description: 'Trainyard platform: GPU fleet, job lifecycle, API and alerts',
    synthesizer: new DefaultStackSynthesizer({ imageAssetsRepositoryName: DEPLOYMENT_NAMES.imageRepository }),
    config,
    workspace: stateful.workspace,
    jobsTable: stateful.jobsTable,
    budgetsTable: stateful.budgetsTable,
    imageRepository: stateful.imageRepository,
    namePrefix: DEPLOYMENT_NAMES.batchPrefix,
  });
  // Image assets are published to the stateful stack's repository, and the exports must exist first.
  platform.addStackDependency(stateful);
  return { stateful, platform };
}
