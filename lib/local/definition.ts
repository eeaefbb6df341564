/**
 * The job state machine definition exactly as the platform stack synthesizes it, rendered to plain ASL for local
 * execution. It is built from the same JobStateMachine construct with stand-in function ARNs (local mode binds each
 * Task to its handler by state name), and CloudFormation pseudo parameters rendered to local values.
 */
import { App, Stack } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { CDK_FEATURE_FLAGS } from '../feature-flags';
import { JobStateMachine, type LifecycleSteps } from '../lifecycle/job-state-machine';

/** ASL as JSON. */
export type StateMachineDefinition = { StartAt: string; States: Record<string, Record<string, unknown>> } & Record<
  string,
  unknown
>;

const PSEUDO: Record<string, string> = {
  'AWS::Partition': 'aws',
  'AWS::Region': 'us-east-1',
  'AWS::AccountId': '000000000000',
  'AWS::URLSuffix': 'amazonaws.com',
};

/** Renders a resolved CloudFormation string expression (literals, Fn::Join, Ref, Fn::GetAtt) to a plain string. */
export function renderCfnString(node: unknown): string {
  if (typeof node === 'string') return node;
  if (node && typeof node === 'object') {
    const value = node as Record<string, unknown>;
    const join = value['Fn::Join'];
    if (Array.isArray(join)) {
      const [separator, parts] = join as [string, unknown[]];
      return parts.map(renderCfnString).join(separator);
    }
    if (typeof value.Ref === 'string') return PSEUDO[value.Ref] ?? `local-${value.Ref}`;
    const getAtt = value['Fn::GetAtt'];
    if (Array.isArray(getAtt)) return `local-${getAtt.join('-')}`;
  }
  throw new Error(`cannot render ${JSON.stringify(node)} in a state machine definition`);
}

/** The rendered ASL of a JobStateMachine construct. */
export function definitionOf(machine: JobStateMachine): StateMachineDefinition {
  const cfn = machine.stateMachine.node.defaultChild as sfn.CfnStateMachine;
  const rendered = renderCfnString(Stack.of(machine).resolve(cfn.definitionString));
  return JSON.parse(rendered) as StateMachineDefinition;
}

/** Stand-in ARN of a step function in local mode. */
export function localFunctionArn(step: string): string {
  return `arn:aws:lambda:us-east-1:000000000000:function:trainyard-local-${step}`;
}

/** Synthesizes the job state machine from its construct (no bundling, no assets) and returns its ASL. */
export function synthesizeJobStateMachineDefinition(): StateMachineDefinition {
  const app = new App({ context: { ...CDK_FEATURE_FLAGS, 'aws:cdk:bundling-stacks': [] } });
  const stack = new Stack(app, 'TrainyardLocal');
  const fn = (name: string) => lambda.Function.fromFunctionArn(stack, name, localFunctionArn(name));
  const steps: LifecycleSteps = {
    analyze: fn('analyze'),
    costGate: fn('cost-gate'),
    prepareAttempt: fn('prepare-attempt'),
    attemptOutcome: fn('attempt-outcome'),
    pause: fn('pause'),
    backoff: fn('backoff'),
    finalize: fn('finalize'),
  };
  const machine = new JobStateMachine(stack, 'Lifecycle', {
    steps,
    jobQueues: [],
    jobDefinitionPrefix: 'trainyard',
    logRetention: logs.RetentionDays.ONE_DAY,
  });
  return definitionOf(machine);
}
