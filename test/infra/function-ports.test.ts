/**
 * Every Lambda is given what its handler may touch. The parts of the control plane a handler takes are its factory's
 * parameter type (read here with the TypeScript compiler); for each, the function must have the environment variable
 * the part is built from (lambdas/shared/aws-control-plane.ts) and a grant to use it. Parts are built on first use,
 * and a handler reaches some only on some paths (PrepareAttempt reads the budgets table only before a new attempt),
 * so a missing variable or grant shows nowhere but on AWS, after the work before it is done.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { Stack } from 'aws-cdk-lib';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import ts from 'typescript';
import { beforeAll, describe, expect, it } from 'vitest';
import { ENV } from '../../lambdas/shared/aws-control-plane';
import { TrainyardFunction } from '../../lib/function';
import { type Synthesized, synthesize } from './synth';

type Statement = { Action: string | string[]; Resource: unknown };

/** What a part needs: the variable it is built from, and a grant its calls need (tested on the role's statements). */
const NEEDS: Record<string, { env?: string; grant?: (statements: Statement[]) => boolean; why: string }> = {
  jobs: { env: ENV.jobsTable, grant: (st) => touches(st, 'dynamodb:GetItem', 'JobsTableArn'), why: 'the jobs table' },
  ledger: {
    env: ENV.budgetsTable,
    grant: (st) => touches(st, 'dynamodb:GetItem', 'BudgetsTableArn'),
    why: 'the budgets table',
  },
  workspace: { env: ENV.workspaceBucket, grant: (st) => allows(st, 's3:'), why: 'the workspace bucket' },
  events: { env: ENV.eventBus, grant: (st) => allows(st, 'events:PutEvents'), why: 'the event bus' },
  batchPrefix: { env: ENV.batchPrefix, why: 'Batch queue and definition names' },
  logs: { env: ENV.trainingLogGroup, grant: (st) => allows(st, 'logs:GetLogEvents'), why: 'training logs' },
  trainingLogGroup: { env: ENV.trainingLogGroup, why: 'the training log group' },
  lifecycle: { grant: (st) => allows(st, 'states:'), why: 'the job state machine' },
  batch: { grant: (st) => allows(st, 'batch:'), why: 'Batch' },
  fleet: { grant: (st) => allows(st, 'ec2:'), why: 'EC2 instance and price facts' },
  spotQuotes: { grant: (st) => allows(st, 'ec2:DescribeSpotPriceHistory'), why: 'spot prices' },
  // Built into every bundle (TrainyardFunction's required config), or needing nothing from the stack.
  config: { why: 'the configuration' },
  clock: { why: 'the clock' },
  newId: { why: 'new ids' },
  metrics: { why: 'the metric publisher, which the handler.ts passes (checked below)' },
};

const actionsOf = (st: Statement) => (Array.isArray(st.Action) ? st.Action : [st.Action]);
const allows = (statements: Statement[], prefix: string) =>
  statements.some((st) => actionsOf(st).some((a) => a.startsWith(prefix) || a === `${prefix.split(':')[0]}:*`));
const touches = (statements: Statement[], action: string, resource: string) =>
  statements.some((st) => actionsOf(st).includes(action) && JSON.stringify(st.Resource).includes(resource));

/** The control-plane parts each Lambda entry's handler factory takes, by handler folder. */
function partsByHandler(entries: string[]): Map<string, string[]> {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    'tsconfig.json',
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  );
  if (!parsed) throw new Error('tsconfig.json could not be read');
  const program = ts.createProgram(entries, parsed.options);
  const checker = program.getTypeChecker();
  const parts = new Map<string, string[]>();
  for (const entry of entries) {
    const source = program.getSourceFile(entry);
    if (!source) throw new Error(`${entry} is not in the program`);
    const visit = (node: ts.Node): void => {
      if (
        ts.isCallExpression(node) &&
        ts.isIdentifier(node.expression) &&
        /^create\w+Handler$/.test(node.expression.text)
      ) {
        const plane = checker.getResolvedSignature(node)?.parameters[0];
        if (plane) {
          const type = checker.getTypeOfSymbolAtLocation(plane, node);
          parts.set(
            entry.split('/')[1] ?? entry,
            type.getProperties().map((p) => p.name),
          );
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return parts;
}

let s: Synthesized;
let functions: TrainyardFunction[];
let parts: Map<string, string[]>;
beforeAll(() => {
  s = synthesize();
  functions = s.platform.node.findAll().filter((c): c is TrainyardFunction => c instanceof TrainyardFunction);
  const entries = readdirSync('lambdas', { withFileTypes: true })
    .filter((d) => d.isDirectory() && readdirSync(`lambdas/${d.name}`).includes('handler.ts'))
    .map((d) => `lambdas/${d.name}/handler.ts`);
  parts = partsByHandler(entries);
}, 60_000);

describe('each Lambda has the variables and grants for every part of the control plane its handler takes', () => {
  it('deploys every Lambda entry, and finds the parts of each', () => {
    expect([...new Set(functions.map((f) => f.handlerName))].sort()).toEqual([...parts.keys()].sort());
    for (const [handler, taken] of parts) expect(taken.length, handler).toBeGreaterThan(0);
  });

  it('knows every part a handler takes', () => {
    const unknown = [...parts.values()].flat().filter((part) => !(part in NEEDS));
    expect(unknown, 'add the part to NEEDS with the variable and grant it needs').toEqual([]);
  });

  it('sets the variable each part is built from, and grants what each part calls', () => {
    const missing: string[] = [];
    for (const fn of functions) {
      const stack = Stack.of(fn);
      const cfn = fn.node.defaultChild as lambda.CfnFunction;
      const env = (stack.resolve(cfn.environment) as { variables?: Record<string, unknown> } | undefined)?.variables;
      const role = stack.getLogicalId(fn.role?.node.defaultChild as never);
      const statements = s.platformTemplate.findResources('AWS::IAM::Policy');
      const own = Object.values(statements)
        .map((r) => (r as { Properties: { Roles: unknown[]; PolicyDocument: { Statement: Statement[] } } }).Properties)
        .filter((p) => JSON.stringify(p.Roles).includes(`"${role}"`))
        .flatMap((p) => p.PolicyDocument.Statement);
      for (const part of parts.get(fn.handlerName) ?? []) {
        const need = NEEDS[part];
        if (need?.env && env?.[need.env] === undefined) missing.push(`${fn.handlerName}: ${need.env} (${need.why})`);
        if (need?.grant && !need.grant(own)) missing.push(`${fn.handlerName}: a grant on ${need.why} (${part})`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('passes a metric publisher to every handler that takes one', () => {
    for (const [handler, taken] of parts) {
      const source = readFileSync(`lambdas/${handler}/handler.ts`, 'utf8');
      expect(/awsControlPlane\(\{\s*metrics:/.test(source), handler).toBe(taken.includes('metrics'));
    }
  });
});
