/**
 * CloudFormation's limit on resources per stack, checked at synth with the setting that drives the count: every team
 * adds its job role, the role's policy and a job definition for each tier to the platform stack. CDK refuses such a
 * stack at synth as well, but names only resource types; this names the teams, how many fit, and what to change.
 */
import { CfnResource, Stack } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';

/** The most resources CloudFormation takes in one stack. */
export const CLOUDFORMATION_STACK_RESOURCE_LIMIT = 500;

/** The CloudFormation resources defined under `scope` in `stack` (a nested stack's are its own). */
export function resourcesIn(scope: IConstruct, stack: Stack = Stack.of(scope)): number {
  return scope.node.findAll().filter((c) => CfnResource.isCfnResource(c) && Stack.of(c) === stack).length;
}

/**
 * The error for a stack over the limit, empty when it is within it: what the teams add (each team's constructs are
 * given), what the rest of the stack holds, and how many teams this configuration fits.
 */
export function teamResourceLimitErrors(stack: Stack, teams: ReadonlyMap<string, readonly IConstruct[]>): string[] {
  const limit = CLOUDFORMATION_STACK_RESOURCE_LIMIT;
  const total = resourcesIn(stack);
  if (total <= limit) return [];
  const perTeam = [...teams.values()].map((scopes) => scopes.reduce((n, scope) => n + resourcesIn(scope, stack), 0));
  const byTeams = perTeam.reduce((a, b) => a + b, 0);
  const rest = total - byTeams;
  const each = Math.max(1, ...perTeam);
  const fit = Math.max(0, Math.floor((limit - rest) / each));
  return [
    `stack ${stack.stackName} would hold ${total} CloudFormation resources, and CloudFormation takes at most ${limit} in a stack: the ${teams.size} teams add ${byTeams} (${each} each: the team's job role, its policy and a job definition for every tier) to the ${rest} of the rest of the platform, so this configuration fits at most ${fit} teams. Deploy the other teams as a second Trainyard (another account or region), or define fewer tiers.`,
  ];
}
