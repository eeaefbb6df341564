/**
 * The CDK feature flags every Trainyard app is created with: the deployed app (bin/app.ts), the tests' synth and local
 * mode's state machine alike, so what the tests check and what local mode runs is what `cdk deploy` creates.
 *
 * Feature flags: CDK keeps old behaviour unless a flag opts in to the new one, and `cdk init` writes the flags it then
 * recommends into a new project's cdk.json. Trainyard sets them here, in code, so its tests synthesize with them too.
 * Each one is decided: {@link CDK_FEATURE_FLAGS} holds every flag that aws-cdk-lib 2.276.0 recommends, at its
 * recommended value except the departures in {@link CDK_FLAG_DEPARTURES}, each with its reason. A CDK upgrade that
 * recommends a new flag fails test/infra/feature-flags.test.ts until the flag is decided here (a flag changes the
 * templates of a deployed app, so none is taken up silently). A deployment's cdk.json `context` overrides any of
 * them, as CDK's own precedence has it.
 */

/** Flags set to something other than CDK's recommendation, and why. */
export const CDK_FLAG_DEPARTURES: Readonly<Record<string, string>> = {
  '@aws-cdk/core:defaultCrossStackReferences':
    "'strong': the platform stack imports the stateful stack's tables, bucket and repository as CloudFormation exports, so the stateful stack (which holds every job record, budget and checkpoint) cannot be deleted or have an exported resource replaced while the platform uses it; 'weak' references would allow both.",
  '@aws-cdk/core:enableAdditionalMetadataCollection':
    "false: Trainyard is deployed into its operator's own AWS account, so it does not widen what CDK reports about that account's app (the L2 property keys and values this flag adds); a deployment that wants it sets the flag in its cdk.json.",
};

/** The CDK feature flags of every Trainyard app (see the module's comment), by name. */
export const CDK_FEATURE_FLAGS = {
  '@aws-cdk-containers/ecs-service-extensions:enableDefaultLogDriver': true,
  '@aws-cdk/aws-apigateway:authorizerChangeDeploymentLogicalId': true,
  '@aws-cdk/aws-apigateway:disableCloudWatchRole': true,
  '@aws-cdk/aws-apigateway:logGroupDestinationArnWithoutWildcard': true,
  '@aws-cdk/aws-apigateway:requestValidatorUniqueId': true,
  '@aws-cdk/aws-appsync:appSyncGraphQLAPIScopeLambdaPermission': true,
  '@aws-cdk/aws-appsync:useArnForSourceApiAssociationIdentifier': true,
  '@aws-cdk/aws-autoscaling:generateLaunchTemplateInsteadOfLaunchConfig': true,
  '@aws-cdk/aws-batch:defaultToAL2023': true,
  '@aws-cdk/aws-cloudfront:defaultFunctionRuntimeV2_0': true,
  '@aws-cdk/aws-cloudfront:defaultViewerProtocolPolicyRedirectToHttps': true,
  '@aws-cdk/aws-cloudwatch-actions:changeLambdaPermissionLogicalIdForLambdaAction': true,
  '@aws-cdk/aws-codedeploy:removeAlarmsFromDeploymentGroup': true,
  '@aws-cdk/aws-codepipeline-actions:useNewDefaultBranchForCodeCommitSource': true,
  '@aws-cdk/aws-codepipeline:crossAccountKeyAliasStackSafeResourceName': true,
  '@aws-cdk/aws-codepipeline:crossAccountKeysDefaultValueToFalse': true,
  '@aws-cdk/aws-codepipeline:defaultPipelineTypeToV2': true,
  '@aws-cdk/aws-dynamodb:resourcePolicyPerReplica': true,
  '@aws-cdk/aws-dynamodb:retainTableReplica': true,
  '@aws-cdk/aws-ec2:bastionHostUseAmazonLinux2023ByDefault': true,
  '@aws-cdk/aws-ec2:ebsDefaultGp3Volume': true,
  '@aws-cdk/aws-ec2:ec2SumTImeoutEnabled': true,
  '@aws-cdk/aws-ec2:launchTemplateDefaultUserData': true,
  '@aws-cdk/aws-ec2:requirePrivateSubnetsForEgressOnlyInternetGateway': true,
  '@aws-cdk/aws-ec2:restrictDefaultSecurityGroup': true,
  '@aws-cdk/aws-ec2:uniqueImdsv2TemplateName': true,
  '@aws-cdk/aws-ecs-patterns:secGroupsDisablesImplicitOpenListener': true,
  '@aws-cdk/aws-ecs-patterns:uniqueTargetGroupId': true,
  '@aws-cdk/aws-ecs:arnFormatIncludesClusterName': true,
  '@aws-cdk/aws-ecs:disableExplicitDeploymentControllerForCircuitBreaker': true,
  '@aws-cdk/aws-ecs:reduceEc2FargateCloudWatchPermissions': true,
  '@aws-cdk/aws-ecs:removeDefaultDeploymentAlarm': true,
  '@aws-cdk/aws-ecs:removeEmptyLoadBalancers': true,
  '@aws-cdk/aws-efs:denyAnonymousAccess': true,
  '@aws-cdk/aws-efs:mountTargetOrderInsensitiveLogicalId': true,
  '@aws-cdk/aws-eks:defaultToAL2023': true,
  '@aws-cdk/aws-eks:nodegroupNameAttribute': true,
  '@aws-cdk/aws-eks:useNativeOidcProvider': true,
  '@aws-cdk/aws-elasticloadbalancingV2:albDualstackWithoutPublicIpv4SecurityGroupRulesDefault': true,
  '@aws-cdk/aws-elasticloadbalancingv2:networkLoadBalancerWithSecurityGroupByDefault': true,
  '@aws-cdk/aws-elasticloadbalancingv2:usePostQuantumTlsPolicy': true,
  '@aws-cdk/aws-events:eventsTargetQueueSameAccount': true,
  '@aws-cdk/aws-events:requireEventBusPolicySid': true,
  '@aws-cdk/aws-iam:importedRoleStackSafeDefaultPolicyName': true,
  '@aws-cdk/aws-iam:minimizePolicies': true,
  '@aws-cdk/aws-iam:oidcRejectUnauthorizedConnections': true,
  '@aws-cdk/aws-kms:aliasNameRef': true,
  '@aws-cdk/aws-kms:applyImportedAliasPermissionsToPrincipal': true,
  '@aws-cdk/aws-kms:reduceCrossAccountRegionPolicyScope': true,
  '@aws-cdk/aws-lambda-nodejs:sdkV3ExcludeSmithyPackages': true,
  '@aws-cdk/aws-lambda-nodejs:useLatestRuntimeVersion': true,
  '@aws-cdk/aws-lambda:createNewPoliciesWithAddToRolePolicy': false,
  '@aws-cdk/aws-lambda:recognizeLayerVersion': true,
  '@aws-cdk/aws-lambda:useCdkManagedLogGroup': true,
  '@aws-cdk/aws-opensearchservice:enableOpensearchMultiAzWithStandby': true,
  '@aws-cdk/aws-rds:auroraClusterChangeScopeOfInstanceParameterGroupWithEachParameters': true,
  '@aws-cdk/aws-rds:databaseProxyUniqueResourceName': true,
  '@aws-cdk/aws-rds:preventRenderingDeprecatedCredentials': true,
  '@aws-cdk/aws-rds:setCorrectValueForDatabaseInstanceReadReplicaInstanceResourceId': true,
  '@aws-cdk/aws-redshift:columnId': true,
  '@aws-cdk/aws-route53-patterns:useDistribution': true,
  '@aws-cdk/aws-route53-patters:useCertificate': true,
  '@aws-cdk/aws-route53-targets:userPoolDomainNameMethodWithoutCustomResource': true,
  '@aws-cdk/aws-s3:createDefaultLoggingPolicy': true,
  '@aws-cdk/aws-s3:keepNotificationInImportedBucket': false,
  '@aws-cdk/aws-s3:publicAccessBlockedByDefault': true,
  '@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy': true,
  '@aws-cdk/aws-s3:setUniqueReplicationRoleName': true,
  '@aws-cdk/aws-secretsmanager:useAttachedSecretResourcePolicyForSecretTargetAttachments': true,
  '@aws-cdk/aws-signer:signingProfileNamePassedToCfn': true,
  '@aws-cdk/aws-sns-subscriptions:restrictSqsDescryption': true,
  '@aws-cdk/aws-stepfunctions-tasks:enableEmrServicePolicyV2': true,
  '@aws-cdk/aws-stepfunctions-tasks:fixRunEcsTaskPolicy': true,
  '@aws-cdk/aws-stepfunctions:useDistributedMapResultWriterV2': true,
  '@aws-cdk/core:annotationsInValidationReport': true,
  '@aws-cdk/core:aspectPrioritiesMutating': true,
  '@aws-cdk/core:cfnIncludeRejectComplexResourceUpdateCreatePolicyIntrinsics': true,
  '@aws-cdk/core:checkSecretUsage': true,
  // Departure (CDK recommends 'weak'): see CDK_FLAG_DEPARTURES.
  '@aws-cdk/core:defaultCrossStackReferences': 'strong',
  // Departure (CDK recommends true): see CDK_FLAG_DEPARTURES.
  '@aws-cdk/core:enableAdditionalMetadataCollection': false,
  '@aws-cdk/core:enablePartitionLiterals': true,
  '@aws-cdk/core:explicitStackTags': true,
  '@aws-cdk/core:includePrefixInUniqueNameGeneration': true,
  '@aws-cdk/core:target-partitions': ['aws', 'aws-cn'],
  '@aws-cdk/core:validateAgainstDefaultRules': true,
  '@aws-cdk/core:validateSnapshotRemovalPolicy': true,
  '@aws-cdk/custom-resources:logApiResponseDataPropertyTrueDefault': false,
  '@aws-cdk/customresources:installLatestAwsSdkDefault': false,
  '@aws-cdk/s3-notifications:addS3TrustKeyPolicyForSnsSubscriptions': true,
} as const;
