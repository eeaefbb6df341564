import { Duration, SecretValue, Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { acknowledgeFinding } from '../nag';

/** The source of every event Trainyard puts on its bus. */
export const EVENT_SOURCE = 'trainyard';

/** Detail types that alert people (the rest are for machines and dashboards). */
export const ALERTING_DETAIL_TYPES = [
  'Budget Threshold Crossed',
  'Budget Exhausted',
  'Job Failed',
  'Job Cost Amended',
  'Job PausedForBudget',
  'Cost Report Ready',
] as const;

/** Props for the platform bus and alerts. */
export interface PlatformEventsProps {
  /** Addresses subscribed to the alert topic. */
  readonly alertEmails: readonly string[];
  /** Secrets Manager secret whose string is a Slack incoming-webhook URL. @default - no Slack delivery */
  readonly slackWebhookSecretName?: string;
}

/**
 * The platform's own EventBridge bus; an SNS alert topic (publishing over TLS only) with e-mail subscriptions, which
 * EventBridge rules and this account's CloudWatch alarms publish to; and optional Slack delivery through an
 * EventBridge connection and API destination. Failed deliveries land in a dead-letter queue.
 */
export class PlatformEvents extends Construct {
  /** The bus every Trainyard event goes to. */
  public readonly bus: events.EventBus;
  /** Alerts for people. */
  public readonly alertTopic: sns.Topic;
  /** Alert deliveries that failed. */
  public readonly deadLetters: sqs.Queue;
  /** Fires when any alert delivery failed. */
  public readonly deadLetterAlarm: cloudwatch.Alarm;

  constructor(scope: Construct, id: string, props: PlatformEventsProps) {
    super(scope, id);
    this.bus = new events.EventBus(this, 'Bus', { description: 'Trainyard job, budget and report events' });
    this.alertTopic = new sns.Topic(this, 'AlertTopic', {
      displayName: 'Trainyard alerts',
      enforceSSL: true,
    });
    // The topic's policy (TLS only; the alert rule publishes through a role) replaces SNS's default one, which let the account's
    // CloudWatch alarms publish: without this statement no alarm of the platform would reach anyone.
    const stack = Stack.of(this);
    this.alertTopic.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'AlarmsOfThisAccountPublish',
        principals: [new iam.ServicePrincipal('cloudwatch.amazonaws.com')],
        actions: ['sns:Publish'],
        resources: [this.alertTopic.topicArn],
        conditions: {
          StringEquals: { 'aws:SourceAccount': stack.account },
          ArnLike: { 'aws:SourceArn': `arn:${stack.partition}:cloudwatch:${stack.region}:${stack.account}:alarm:*` },
        },
      }),
    );
    for (const email of props.alertEmails) {
      this.alertTopic.addSubscription(new subscriptions.EmailSubscription(email));
    }
    this.deadLetters = new sqs.Queue(this, 'AlertDeadLetters', {
      enforceSSL: true,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      // As long as the handlers' queues: SQS's default of 4 days would drop a weekend's failures, and the alarm with them.
      retentionPeriod: Duration.days(14),
    });
    acknowledgeFinding(this.deadLetters, 'SQS3', 'This queue is the dead-letter queue for alert deliveries.');
    // An alert that could not be delivered must not vanish silently; the alarm shows on the console and dashboards
    // (it cannot notify through the topic whose deliveries are failing).
    this.deadLetterAlarm = new cloudwatch.Alarm(this, 'AlertDeadLettersAlarm', {
      alarmDescription: 'Trainyard alert deliveries (SNS or Slack) are failing: see the AlertDeadLetters queue',
      metric: this.deadLetters.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(5) }),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    const alertPattern: events.EventPattern = {
      source: [EVENT_SOURCE],
      detailType: [...ALERTING_DETAIL_TYPES],
    };
    new events.Rule(this, 'AlertsToTopic', {
      eventBus: this.bus,
      description: 'Budget, failure and report events to the alert topic',
      eventPattern: alertPattern,
      targets: [
        new targets.SnsTopic(this.alertTopic, {
          // Through a role of this rule's, not a topic policy for the EventBridge service (CDK's default), which any
          // account's rule naming this topic could use to send alerts of its own to the team leads.
          authorizeUsingRole: true,
          deadLetterQueue: this.deadLetters,
          message: events.RuleTargetInput.fromText(
            `Trainyard: ${events.EventField.fromPath('$.detail-type')} — ${events.EventField.fromPath('$.detail.summary')}`,
          ),
        }),
      ],
    });
    if (props.slackWebhookSecretName) {
      const webhook = SecretValue.secretsManager(props.slackWebhookSecretName);
      // Slack webhooks carry their credential in the URL; the connection needs some authorization, so it sends a
      // harmless marker header. The URL is resolved by CloudFormation from the secret at deploy time.
      const connection = new events.Connection(this, 'SlackConnection', {
        description: 'Slack incoming webhook for Trainyard alerts',
        authorization: events.Authorization.apiKey('X-Trainyard-Alert', SecretValue.unsafePlainText('trainyard')),
      });
      const destination = new events.ApiDestination(this, 'SlackDestination', {
        connection,
        endpoint: webhook.unsafeUnwrap(),
        httpMethod: events.HttpMethod.POST,
        rateLimitPerSecond: 1,
      });
      new events.Rule(this, 'AlertsToSlack', {
        eventBus: this.bus,
        description: 'Budget, failure and report events to Slack',
        eventPattern: alertPattern,
        targets: [
          new targets.ApiDestination(destination, {
            deadLetterQueue: this.deadLetters,
            event: events.RuleTargetInput.fromObject({
              text: `Trainyard: ${events.EventField.fromPath('$.detail-type')} — ${events.EventField.fromPath('$.detail.summary')}`,
            }),
          }),
        ],
      });
    }
  }
}
