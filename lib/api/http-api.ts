import { Duration, Stack } from 'aws-cdk-lib';
import * as apigateway from 'aws-cdk-lib/aws-apigateway';
import * as apigwv2 from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpIamAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as events from 'aws-cdk-lib/aws-events';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { API_ROUTES } from '../../lambdas/api/route-table';
import { ENV } from '../../lambdas/shared/aws-control-plane';
import type { TrainyardConfig } from '../config';
import { TrainyardFunction } from '../function';
import { grantBudgetsByTeam, grantTableReadWrites } from '../grants';
import { acknowledgeFinding, nagResourceName } from '../nag';

/** Props of the Trainyard HTTP API. */
export interface TrainyardHttpApiProps {
  /** Resolved configuration (teams, admins, tiers, limits), baked into the function. */
  readonly config: TrainyardConfig;
  /** Jobs, attempts, decisions and idempotency claims. */
  readonly jobsTable: dynamodb.ITableV2;
  /** Budget ledger. */
  readonly budgetsTable: dynamodb.ITableV2;
  /** Workspace bucket: bundles, uploads, checkpoints, metrics. */
  readonly workspace: s3.IBucket;
  /** The job lifecycle; executions are started by name (the job id) and paused jobs resumed by task token. */
  readonly stateMachine: sfn.IStateMachine;
  /** Platform bus (budget threshold crossings a limit change makes). */
  readonly eventBus: events.IEventBus;
  /** Log group of the training containers (GET /jobs/{id}/logs). */
  readonly trainingLogGroup: logs.ILogGroup;
  /** Prefix of Batch queue and job definition names. */
  readonly batchPrefix: string;
}

/** Field → $context variable of the JSON access log (one JSON object per request). */
export const ACCESS_LOG_FIELDS = {
  requestId: '$context.requestId',
  time: '$context.requestTime',
  ip: '$context.identity.sourceIp',
  principal: '$context.identity.userArn',
  method: '$context.httpMethod',
  routeKey: '$context.routeKey',
  path: '$context.path',
  status: '$context.status',
  protocol: '$context.protocol',
  responseLength: '$context.responseLength',
  latencyMs: '$context.responseLatency',
  integrationLatencyMs: '$context.integrationLatency',
  integrationError: '$context.integrationErrorMessage',
  error: '$context.error.message',
} as const;

/**
 * The researchers' HTTP API: an API Gateway HTTP API whose every route requires IAM (SigV4) authorization, one
 * Lambda behind it (lambdas/api), JSON access logs with the configured retention, and least-privilege grants.
 *
 * Grants, and why each is as wide as it is:
 * - jobs and budgets tables: read/write data (the L2 grant includes their indexes: listing jobs and scopes by team);
 * - workspace: read (bundles, uploads, checkpoint manifests, metrics; presigned downloads) and put (bundles;
 *   presigned uploads) — no delete;
 * - state machine: StartExecution and SendTaskSuccess (resume/cancel a job paused for budget);
 * - batch:TerminateJob on this account and region's job ARNs: Batch job ids are assigned at submit, so no narrower
 *   resource exists (acknowledged finding);
 * - logs:GetLogEvents on the training log group only; events:PutEvents on the platform bus only;
 * - ec2:DescribeSpotPriceHistory, which has no resource-level permissions (acknowledged finding).
 */
export class TrainyardHttpApi extends Construct {
  /** The HTTP API. */
  public readonly api: apigwv2.HttpApi;
  /** The API's Lambda function. */
  public readonly handler: TrainyardFunction;
  /** Access logs of the API's default stage. */
  public readonly accessLogs: logs.LogGroup;

  constructor(scope: Construct, id: string, props: TrainyardHttpApiProps) {
    super(scope, id);
    const retention = props.config.logRetentionDays as logs.RetentionDays;
    this.handler = new TrainyardFunction(this, 'Handler', {
      entry: 'lambdas/api/handler.ts',
      description: 'Trainyard HTTP API: submit, estimate, inspect and cancel training jobs; budgets and tiers',
      logRetention: retention,
      config: props.config,
      // API Gateway gives an integration at most 30 s.
      timeout: Duration.seconds(29),
      // Memory: bundleMemoryMiB (lib/function.ts), as for Analyze: a bundle is read and unpacked whole.
      environment: {
        [ENV.jobsTable]: props.jobsTable.tableName,
        [ENV.budgetsTable]: props.budgetsTable.tableName,
        [ENV.workspaceBucket]: props.workspace.bucketName,
        [ENV.stateMachine]: props.stateMachine.stateMachineArn,
        [ENV.eventBus]: props.eventBus.eventBusName,
        [ENV.batchPrefix]: props.batchPrefix,
        [ENV.trainingLogGroup]: props.trainingLogGroup.logGroupName,
      },
    });
    this.grant(props);

    this.accessLogs = new logs.LogGroup(this, 'AccessLogs', { retention });
    this.api = new apigwv2.HttpApi(this, 'Api', {
      description: 'Trainyard: submit and manage GPU training jobs (IAM/SigV4 authorization)',
      defaultAuthorizer: new HttpIamAuthorizer(),
      createDefaultStage: false,
    });
    new apigwv2.HttpStage(this, 'DefaultStage', {
      httpApi: this.api,
      autoDeploy: true,
      accessLogSettings: {
        destination: new apigwv2.LogGroupLogDestination(this.accessLogs),
        format: apigateway.AccessLogFormat.custom(JSON.stringify(ACCESS_LOG_FIELDS)),
      },
      throttle: { rateLimit: 50, burstLimit: 100 },
    });
    const integration = new HttpLambdaIntegration('Integration', this.handler);
    for (const route of API_ROUTES) {
      this.api.addRoutes({ path: route.path, methods: [apigwv2.HttpMethod[route.method]], integration });
    }
  }

  private grant(props: TrainyardHttpApiProps): void {
    const fn = this.handler;
    grantTableReadWrites(props.jobsTable, fn);
    grantTableReadWrites(props.budgetsTable, fn);
    grantBudgetsByTeam(fn, props.budgetsTable);
    props.workspace.grantRead(fn);
    props.workspace.grantPut(fn);
    props.stateMachine.grantStartExecution(fn);
    props.stateMachine.grant(fn, 'states:SendTaskSuccess');
    props.trainingLogGroup.grant(fn, 'logs:GetLogEvents');
    props.eventBus.grantPutEventsTo(fn);
    const jobArns = Stack.of(this).formatArn({ service: 'batch', resource: 'job', resourceName: '*' });
    fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['batch:TerminateJob'], resources: [jobArns] }));
    fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['ec2:DescribeSpotPriceHistory'], resources: ['*'] }));

    const role = fn.role as iam.IRole;
    const ack = (finding: string, reason: string) => acknowledgeFinding(role, finding, reason);
    const tableIndexes = (table: dynamodb.ITableV2) => `Resource::${nagResourceName(this, table.tableArn)}/index/*`;
    ack(
      `IAM5[${tableIndexes(props.jobsTable)}]`,
      'GET /jobs queries the jobs table index byTeam (the L2 grant covers its indexes).',
    );
    ack(
      `IAM5[${tableIndexes(props.budgetsTable)}]`,
      'GET /budgets queries the budgets table index byTeam (the L2 grant covers its indexes).',
    );
    const bucket = nagResourceName(this, props.workspace.bucketArn);
    ack(
      `IAM5[Resource::${bucket}/*]`,
      'Bundles live under teams/<team>/ for every team and uploads under scratch/uploads/; the API serves all teams and checks the team itself.',
    );
    ack(
      'IAM5[Action::s3:GetObject*]',
      'The L2 read grant: reading bundles, uploads, manifests and metrics, and signing download URLs.',
    );
    ack('IAM5[Action::s3:GetBucket*]', 'The L2 read grant on the workspace bucket only.');
    ack('IAM5[Action::s3:List*]', 'Listing checkpoints and an upload\u2019s size in the workspace bucket only.');
    ack(
      'IAM5[Action::s3:Abort*]',
      'The L2 put grant: aborting a multipart bundle upload in the workspace bucket only.',
    );
    ack(
      'IAM5[Resource::arn:<AWS::Partition>:batch:<AWS::Region>:<AWS::AccountId>:job/*]',
      'Cancel terminates the job\u2019s Batch job; Batch assigns job ids at submit, so job/* in this account and region is the narrowest ARN.',
    );
    ack(
      'IAM5[Resource::*]',
      'ec2:DescribeSpotPriceHistory has no resource-level permissions; GET /tiers and estimates read current spot prices.',
    );
    ack(
      'IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
      'The managed policy only lets the function write its own CloudWatch logs, as every Lambda function must.',
    );
  }
}
