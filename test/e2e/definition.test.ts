/**
 * Local mode runs the lifecycle the platform stack deploys: the state machine local mode executes is the ASL
 * synthesized from the same JobStateMachine construct, equal to the platform stack's own definition except for the
 * Lambda function ARNs (stand-ins locally) and Step Functions' Task timeout default, which the local engine needs
 * spelled out (it would otherwise time Tasks out after 60 s).
 */
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../lib/config';
import { STATE_NAMES } from '../../lib/lifecycle/job-state-machine';
import {
  definitionOf,
  type StateMachineDefinition,
  synthesizeJobStateMachineDefinition,
} from '../../lib/local/definition';
import { type LocalMode, startLocalMode } from '../../lib/local/local-mode';
import {
  LOCAL_TASK_TIMEOUT_SECONDS,
  LOCAL_TIMEOUT_PARAMETER,
  withAwsTaskTimeouts,
} from '../../lib/local/state-machine-runner';
import { synthesize } from '../infra/synth';
import { E2E_CONFIG, tempDir } from './support';

const LAMBDA_ARN = '<lambda function arn>';

/** A Task's Resource naming a Lambda function (the platform's rendered GetAtt, or local mode's stand-in ARN). */
function isFunctionReference(key: string | undefined, value: unknown): value is string {
  return (
    typeof value === 'string' &&
    (key === 'FunctionName' || (key === 'Resource' && !value.startsWith('arn:aws:states:::')))
  );
}

/** The definition with every Lambda function reference (the only thing that names a deployed resource) masked. */
function maskFunctionArns(definition: StateMachineDefinition): StateMachineDefinition {
  const mask = (value: unknown, key?: string): unknown => {
    if (Array.isArray(value)) return value.map((v) => mask(v));
    if (value && typeof value === 'object') {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, mask(v, k)]));
    }
    if (isFunctionReference(key, value)) return LAMBDA_ARN;
    return value;
  };
  return mask(definition) as StateMachineDefinition;
}

describe('the state machine local mode runs', () => {
  let platform: StateMachineDefinition;
  let local: StateMachineDefinition;
  let mode: LocalMode;
  const dir = tempDir('definition');

  beforeAll(async () => {
    platform = definitionOf(synthesize().platform.lifecycle);
    local = synthesizeJobStateMachineDefinition();
    mode = await startLocalMode({ dir, config: parseConfig(E2E_CONFIG) });
  });

  afterAll(async () => {
    await mode?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("is the platform stack's definition, state for state, but for the Lambda ARNs", () => {
    expect(local.StartAt).toBe(platform.StartAt);
    expect(Object.keys(local.States).sort()).toEqual(Object.keys(platform.States).sort());
    expect(maskFunctionArns(local).States).toEqual(maskFunctionArns(platform).States);
    // The masked part really is a Lambda reference on both sides.
    const functionNames = (d: StateMachineDefinition) =>
      Object.values(d.States).flatMap((s) => (isFunctionReference('Resource', s.Resource) ? [s.Resource] : []));
    expect(functionNames(local).length).toBeGreaterThan(0);
    expect(functionNames(local)).toHaveLength(functionNames(platform).length);
    for (const name of functionNames(local)) expect(name).toMatch(/^arn:aws:lambda:us-east-1:000000000000:function:/);
  });

  it('is what the running local mode executes', () => {
    expect(mode.definition).toEqual(local);
  });

  it('runs with Step Functions’ Task timeouts (its default made explicit, a timeout path read from the state input), and nothing else changed', () => {
    const executed = withAwsTaskTimeouts(local);
    const carried = `${LOCAL_TIMEOUT_PARAMETER}.$`;
    const withoutAddedTimeouts = Object.fromEntries(
      Object.entries(executed.States).map(([name, state]) => {
        const original = local.States[name];
        if (original?.TimeoutSeconds === undefined && state.TimeoutSeconds === LOCAL_TASK_TIMEOUT_SECONDS) {
          const { TimeoutSeconds: _added, ...rest } = state;
          return [name, rest];
        }
        const parameters = state.Parameters as Record<string, unknown> | undefined;
        if (state.TimeoutSecondsPath === `$.${LOCAL_TIMEOUT_PARAMETER}` && parameters?.[carried] !== undefined) {
          const { [carried]: path, ...rest } = parameters;
          return [name, { ...state, Parameters: rest, TimeoutSecondsPath: path }];
        }
        return [name, state];
      }),
    );
    // The Backoff's timeout is the plan's delay, read from the state input as Step Functions reads it.
    expect(local.States[STATE_NAMES.backoff]?.TimeoutSecondsPath).toBe('$.plan.delaySeconds');
    const backoff = executed.States[STATE_NAMES.backoff] as { Parameters: Record<string, unknown> };
    expect(backoff.Parameters[carried]).toBe('$.plan.delaySeconds');
    expect({ ...executed, States: withoutAddedTimeouts }).toEqual(local);
    const tasks = Object.entries(executed.States).filter(([, s]) => s.Type === 'Task');
    expect(tasks.length).toBeGreaterThan(0);
    for (const [name, state] of tasks) {
      expect(state.TimeoutSeconds ?? state.TimeoutSecondsPath, `${name} has a timeout`).toBeDefined();
    }
  });
});
