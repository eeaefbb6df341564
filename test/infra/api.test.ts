// The HTTP API construct in a standalone stack (tables, bucket, state machine, bus and log group of its own): routes
// with IAM authorization, JSON access logs with retention, the function's environment and every grant it gets.
import { Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { apiRoutes } from '../../lambdas/api/app';
import type { ApiPlane } from '../../lambdas/api/plane';
import { API_ROUTES } from '../../lambdas/api/route-table';
import { ACCESS_LOG_FIELDS, TrainyardHttpApi } from '../../lib/api/http-api';
import { createApp } from '../../lib/app';
import { parseConfig } from '../../lib/config';
import { BATCH_JOB_ARNS, resourcesOf } from './synth';

const config = parseConfig({ teams: [{ id: 'nlp', monthlyBudgetUsd: 100 }], logRetentionDays: 90 });
let stack: Stack;
let construct: TrainyardHttpApi;
let template: Template;

beforeAll(() => {
  const app = createApp({ 'aws:cdk:bundling-stacks': [] });
  stack = new Stack(app, 'ApiTest');
  // Like the real tables: each has a byTeam index, which the API queries.
  const table = (id: string) =>
    new dynamodb.TableV2(stack, id, {
      partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
      sortKey: { name: 'sk', type: dynamodb.AttributeType.STRING },
      globalSecondaryIndexes: [
        { indexName: 'byTeam', partitionKey: { name: 'gsi1pk', type: dynamodb.AttributeType.STRING } },
      ],
    });
  construct = new TrainyardHttpApi(stack, 'Api', {
    config,
    jobsTable: table('Jobs'),
    budgetsTable: table('Budgets'),
    workspace: new s3.Bucket(stack, 'Workspace'),
    stateMachine: new sfn.StateMachine(stack, 'Lifecycle', {
      definitionBody: sfn.DefinitionBody.fromChainable(new sfn.Pass(stack, 'Start')),
    }),
    eventBus: new events.EventBus(stack, 'Bus'),
    trainingLogGroup: new logs.LogGroup(stack, 'TrainingLogs'),
    batchPrefix: 'trainyard',
  });
  template = Template.fromStack(stack);
});

type Statement = { Action: string | string[]; Resource: unknown; Effect: string };
function statements(): Statement[] {
  return resourcesOf(template, 'AWS::IAM::Policy')
    .filter(([id]) => id.startsWith('ApiHandlerServiceRoleDefaultPolicy'))
    .flatMap(([, p]) => (p.PolicyDocument as { Statement: Statement[] }).Statement);
}
const actionsOf = (s: Statement) => (Array.isArray(s.Action) ? s.Action : [s.Action]);
const resourcesOfStatement = (s: Statement) => (Array.isArray(s.Resource) ? s.Resource : [s.Resource]);
function statementWith(action: string): Statement {
  const found = statements().filter((s) => actionsOf(s).includes(action));
  expect(found, action).toHaveLength(1);
  return found[0] as Statement;
}
const RESOURCE_TYPES: Record<string, string> = {
  Jobs: 'AWS::DynamoDB::GlobalTable',
  Budgets: 'AWS::DynamoDB::GlobalTable',
  Workspace: 'AWS::S3::Bucket',
  Lifecycle: 'AWS::StepFunctions::StateMachine',
  Bus: 'AWS::Events::EventBus',
  TrainingLogs: 'AWS::Logs::LogGroup',
  ApiAccessLogs: 'AWS::Logs::LogGroup',
  ApiHandler: 'AWS::Lambda::Function',
};
/** The logical id of the one resource of the expected type whose id starts with `prefix`. */
const logicalId = (prefix: string) => {
  const type = RESOURCE_TYPES[prefix] as string;
  const ids = resourcesOf(template, type)
    .map(([id]) => id)
    .filter((id) => id.startsWith(prefix));
  expect(ids, prefix).toHaveLength(1);
  return ids[0] as string;
};

describe('routes', () => {
  it('declares exactly the routes the handler serves', () => {
    const plane = { config } as ApiPlane;
    const served = apiRoutes(plane)
      .map((r) => `${r.method} ${r.path}`)
      .sort();
    expect(served).toEqual(API_ROUTES.map((r) => `${r.method} ${r.path}`).sort());
  });

  it('creates one route per route key, every one with IAM authorization', () => {
    template.resourceCountIs('AWS::ApiGatewayV2::Route', API_ROUTES.length);
    for (const route of API_ROUTES) {
      template.hasResourceProperties('AWS::ApiGatewayV2::Route', {
        RouteKey: `${route.method} ${route.path}`,
        AuthorizationType: 'AWS_IAM',
      });
    }
  });

  it('sends every route to the API function (payload format 2.0)', () => {
    template.resourceCountIs('AWS::ApiGatewayV2::Integration', 1);
    template.hasResourceProperties('AWS::ApiGatewayV2::Integration', {
      IntegrationType: 'AWS_PROXY',
      PayloadFormatVersion: '2.0',
      IntegrationUri: {
        'Fn::GetAtt': [logicalId('ApiHandler') === '' ? '' : Match.stringLikeRegexp('^ApiHandler'), 'Arn'],
      },
    });
  });
});

describe('access logging', () => {
  it('writes one JSON object per request, with the request id and the principal, from the $default stage', () => {
    const [, stage] = resourcesOf(template, 'AWS::ApiGatewayV2::Stage')[0] ?? [];
    expect(stage).toMatchObject({ StageName: '$default', AutoDeploy: true });
    const settings = stage?.AccessLogSettings as { DestinationArn: unknown; Format: string };
    expect(settings.DestinationArn).toEqual({ 'Fn::GetAtt': [logicalId('ApiAccessLogs'), 'Arn'] });
    expect(JSON.parse(settings.Format)).toEqual(ACCESS_LOG_FIELDS);
    expect(JSON.parse(settings.Format)).toMatchObject({
      requestId: '$context.requestId',
      principal: '$context.identity.userArn',
    });
  });

  it('keeps access logs for the configured retention', () => {
    const [, group] =
      resourcesOf(template, 'AWS::Logs::LogGroup').find(([id]) => id === logicalId('ApiAccessLogs')) ?? [];
    expect(group?.RetentionInDays).toBe(90);
  });
});

describe('the function', () => {
  it('names every resource it uses in its environment', () => {
    template.hasResourceProperties('AWS::Lambda::Function', {
      Environment: {
        Variables: Match.objectLike({
          JOBS_TABLE_NAME: { Ref: logicalId('Jobs') },
          BUDGETS_TABLE_NAME: { Ref: logicalId('Budgets') },
          WORKSPACE_BUCKET_NAME: { Ref: logicalId('Workspace') },
          STATE_MACHINE_ARN: { Ref: logicalId('Lifecycle') },
          EVENT_BUS_NAME: { Ref: logicalId('Bus') },
          BATCH_NAME_PREFIX: 'trainyard',
          TRAINING_LOG_GROUP_NAME: { Ref: logicalId('TrainingLogs') },
        }),
      },
      Timeout: 29,
      MemorySize: 3072,
    });
  });
});

describe('grants', () => {
  it('may terminate Batch jobs only by job ARN in its own account and region', () => {
    const s = statementWith('batch:TerminateJob');
    expect(actionsOf(s)).toEqual(['batch:TerminateJob']);
    expect(s.Resource).toEqual(BATCH_JOB_ARNS);
  });

  it('may start executions of and send task success to the lifecycle state machine only', () => {
    const s = statementWith('states:StartExecution');
    expect(actionsOf(s).sort()).toEqual(['states:SendTaskSuccess', 'states:StartExecution']);
    expect(s.Resource).toEqual({ Ref: logicalId('Lifecycle') });
    const all = statements().flatMap(actionsOf);
    expect(all).not.toContain('states:SendTaskFailure');
  });

  it('may read log events of the training log group only, and put events on the platform bus only', () => {
    // The group ARN ending in :* (its streams) and the bare group ARN: nothing outside the training log group.
    const logResources = resourcesOfStatement(statementWith('logs:GetLogEvents'));
    expect(logResources).toHaveLength(2);
    expect(logResources[0]).toEqual({ 'Fn::GetAtt': [logicalId('TrainingLogs'), 'Arn'] });
    expect(JSON.stringify(logResources[1])).toContain(`":log-group:",{"Ref":"${logicalId('TrainingLogs')}"}`);
    expect(statementWith('events:PutEvents').Resource).toEqual({ 'Fn::GetAtt': [logicalId('Bus'), 'Arn'] });
  });

  it('may read and write both tables and their indexes', () => {
    for (const table of ['Jobs', 'Budgets']) {
      const id = logicalId(table);
      const s = statements().find((st) =>
        resourcesOfStatement(st).some((r) => JSON.stringify(r) === JSON.stringify({ 'Fn::GetAtt': [id, 'Arn'] })),
      );
      expect(actionsOf(s as Statement)).toEqual(
        expect.arrayContaining(['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:Query']),
      );
      expect(resourcesOfStatement(s as Statement)).toContainEqual({
        'Fn::Join': ['', [{ 'Fn::GetAtt': [id, 'Arn'] }, '/index/*']],
      });
    }
  });

  it('may read and put workspace objects but never delete them', () => {
    const all = statements().flatMap(actionsOf);
    expect(all).toEqual(expect.arrayContaining(['s3:GetObject*', 's3:List*', 's3:PutObject']));
    expect(all.filter((a) => a.startsWith('s3:Delete'))).toEqual([]);
  });

  it('uses Resource * only for ec2:DescribeSpotPriceHistory, which has no resource-level permissions', () => {
    const wildcard = statements().filter((s) => resourcesOfStatement(s).includes('*'));
    const allowed = wildcard.flatMap(actionsOf).filter((a) => !a.startsWith('xray:'));
    // The house function's X-Ray tracing adds xray:Put* on *, which X-Ray also cannot scope.
    expect(allowed).toEqual(['ec2:DescribeSpotPriceHistory']);
  });

  it('leaves no cdk-nag finding unacknowledged', () => {
    expect(new AwsSolutionsChecks().validateScope(construct).violations).toEqual([]);
  });
});
