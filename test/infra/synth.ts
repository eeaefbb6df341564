import { Template } from 'aws-cdk-lib/assertions';
import { addTrainyardStacks, createApp, type TrainyardStacks } from '../../lib/app';
import { parseConfig, type TrainyardConfig } from '../../lib/config';

/** A synthesized Trainyard deployment for assertions. */
export interface Synthesized extends TrainyardStacks {
  readonly config: TrainyardConfig;
  readonly statefulTemplate: Template;
  readonly platformTemplate: Template;
}

/** A principal ARN used by tests. */
export const arn = (name: string) => `arn:aws:iam::123456789012:role/${name}`;

/** A valid one-type gpu tier config (g5.xlarge), with overrides. */
export const gpuTier = (overrides: Record<string, unknown> = {}) => ({
  id: 'gpu-x',
  kind: 'gpu',
  instanceTypes: ['g5.xlarge'],
  gpus: 1,
  gpuMemoryGiB: 24,
  vcpus: 4,
  memoryMiB: 15000,
  maxRuntime: '2h',
  onDemandUsdPerHour: 1.006,
  peakTflops: 125,
  ...overrides,
});

/** Two teams, warm capacity and alerts: exercises every per-team and per-tier path. */
export const TWO_TEAM_CONFIG = {
  teams: [
    { id: 'nlp', principals: [arn('nlp-researchers')], monthlyBudgetUsd: 1000, fairShareWeight: 1 },
    { id: 'vision', principals: [arn('vision-researchers')], monthlyBudgetUsd: 400, fairShareWeight: 2 },
  ],
  warmCapacity: { 'gpu-large': 8 },
  alerts: { emails: ['leads@example.com'], slackWebhookSecretName: 'trainyard/slack-webhook' },
};

/** Synthesizes both stacks from a config object (Lambda bundling skipped: no esbuild runs in infra tests). */
export function synthesize(input: unknown = TWO_TEAM_CONFIG): Synthesized {
  const config = parseConfig(input, 'test config');
  const app = createApp({ 'aws:cdk:bundling-stacks': [] });
  const stacks = addTrainyardStacks(app, config);
  return {
    ...stacks,
    config,
    statefulTemplate: Template.fromStack(stacks.stateful),
    platformTemplate: Template.fromStack(stacks.platform),
  };
}

/** Resources of one type as [logicalId, properties] pairs. */
export function resourcesOf(template: Template, type: string): Array<[string, Record<string, unknown>]> {
  return Object.entries(template.findResources(type)).map(([id, r]) => [
    id,
    (r as { Properties?: Record<string, unknown> }).Properties ?? {},
  ]);
}

/** Every Batch job in the deployment's account and region, as the templates spell it (TerminateJob's resource). */
export const BATCH_JOB_ARNS = {
  'Fn::Join': [
    '',
    ['arn:', { Ref: 'AWS::Partition' }, ':batch:', { Ref: 'AWS::Region' }, ':', { Ref: 'AWS::AccountId' }, ':job/*'],
  ],
};

/** Every action of these IAM policy statements. */
export const actionsOf = (statements: readonly unknown[]): string[] =>
  statements.flatMap((s) => {
    const action = (s as { Action: string | string[] }).Action;
    return Array.isArray(action) ? action : [action];
  });

/** The Batch actions of these statements, sorted. */
export const batchActionsOf = (statements: readonly unknown[]): string[] =>
  actionsOf(statements)
    .filter((a) => a.startsWith('batch:'))
    .sort();
