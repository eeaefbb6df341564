import { CfnOutput, Stack, type StackProps } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as ecr from 'aws-cdk-lib/aws-ecr';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type { Construct } from 'constructs';
import { TrainyardHttpApi } from './api/http-api';
import type { TrainyardConfig } from './config';
import { PlatformEvents } from './events/alerts';
import { Fleet } from './fleet/fleet';
import { JobDefinitions } from './fleet/job-definitions-for-teams';
import { Network } from './fleet/network';
import { TrainingImages } from './fleet/training-images';
import { EventHandlers } from './lifecycle/event-handlers';
import { JobStateMachine } from './lifecycle/job-state-machine';
import { LifecycleFunctions } from './lifecycle/lifecycle-functions';
import { OperationsDashboard } from './observability/dashboard';
import { teamResourceLimitErrors } from './resource-limit';

/** Props for the platform stack. */
export interface PlatformStackProps extends StackProps {
  /** Resolved configuration. */
  readonly config: TrainyardConfig;
  /** Workspace bucket from the stateful stack. */
  readonly workspace: s3.IBucket;
  /** Jobs table from the stateful stack. */
  readonly jobsTable: dynamodb.ITableV2;
  /** Budgets table from the stateful stack. */
  readonly budgetsTable: dynamodb.ITableV2;
  /** Training image repository from the stateful stack. */
  readonly imageRepository: ecr.IRepository;
  /** Prefix of Batch queue and job definition names. */
  readonly namePrefix: string;
}

/**
 * The stateless platform: network, GPU and CPU capacity, job definitions and images, and the event bus with alerts.
 * Safe to destroy and redeploy; everything that holds data lives in the stateful stack.
 */
export class PlatformStack extends Stack {
  /** Network the compute runs in. */
  public readonly network: Network;
  /** Compute environments, queues and the fair-share policy. */
  public readonly fleet: Fleet;
  /** Team job roles, job definitions and the training log group. */
  public readonly jobDefinitions: JobDefinitions;
  /** The platform bus and alerts. */
  public readonly events: PlatformEvents;
  /** The job lifecycle. */
  public readonly lifecycle: JobStateMachine;
  /** The HTTP API researchers and the CLI call. */
  public readonly api: TrainyardHttpApi;
  /** The operations dashboard, unless `observability.dashboard` is off. */
  public readonly dashboard?: OperationsDashboard;

  constructor(scope: Construct, id: string, props: PlatformStackProps) {
    super(scope, id, props);
    const { config } = props;
    this.network = new Network(this, 'Network', {
      network: config.network,
      logRetention: config.logRetentionDays,
    });
    this.fleet = new Fleet(this, 'Fleet', { config, network: this.network, namePrefix: props.namePrefix });
    this.jobDefinitions = new JobDefinitions(this, 'JobDefinitions', {
      config,
      images: new TrainingImages(this, 'TrainingImages'),
      imageRepository: props.imageRepository,
      workspace: props.workspace,
      assignPublicIp: this.network.assignPublicIp,
      namePrefix: props.namePrefix,
    });
    this.events = new PlatformEvents(this, 'Events', {
      alertEmails: config.alerts.emails,
      slackWebhookSecretName: config.alerts.slackWebhookSecretName,
    });
    const steps = new LifecycleFunctions(this, 'LifecycleSteps', {
      config,
      jobsTable: props.jobsTable,
      budgetsTable: props.budgetsTable,
      workspace: props.workspace,
      eventBus: this.events.bus,
      batchPrefix: props.namePrefix,
      logRetention: config.logRetentionDays,
    });
    this.lifecycle = new JobStateMachine(this, 'Lifecycle', {
      steps,
      jobQueues: this.fleet.queues,
      jobDefinitionPrefix: props.namePrefix,
      logRetention: config.logRetentionDays,
      alertTopic: this.events.alertTopic,
    });
    new EventHandlers(this, 'EventHandlers', {
      jobsTable: props.jobsTable,
      budgetsTable: props.budgetsTable,
      workspace: props.workspace,
      eventBus: this.events.bus,
      stateMachine: this.lifecycle.stateMachine,
      config,
      batchPrefix: props.namePrefix,
      logRetention: config.logRetentionDays,
      alertTopic: this.events.alertTopic,
      computeSubnets: this.network.computeSubnets,
    });
    this.api = new TrainyardHttpApi(this, 'Api', {
      config,
      jobsTable: props.jobsTable,
      budgetsTable: props.budgetsTable,
      workspace: props.workspace,
      stateMachine: this.lifecycle.stateMachine,
      eventBus: this.events.bus,
      trainingLogGroup: this.jobDefinitions.logGroup,
      batchPrefix: props.namePrefix,
    });
    new CfnOutput(this, 'ApiUrl', {
      value: this.api.api.apiEndpoint,
      description: 'Trainyard HTTP API (SigV4); set TRAINYARD_API_URL to this for the CLI',
    });
    this.node.addValidation({ validate: () => teamResourceLimitErrors(this, this.jobDefinitions.teamScopes) });
    if (config.observability.dashboard) {
      // Last: the dashboard graphs every function and alarm defined above.
      const dashboardName = `${props.namePrefix}-operations`;
      this.dashboard = new OperationsDashboard(this, 'Operations', {
        config,
        stateMachine: this.lifecycle.stateMachine,
        httpApi: this.api.api,
        dashboardName,
      });
      new CfnOutput(this, 'DashboardUrl', {
        value: `https://${this.region}.console.aws.amazon.com/cloudwatch/home?region=${this.region}#dashboards/dashboard/${dashboardName}`,
        description: 'Trainyard operations dashboard (CloudWatch)',
      });
    }
  }
}
