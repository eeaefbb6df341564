#!/usr/bin/env -S npx tsx
// CDK entry point: load and validate config, create the stacks, attach cdk-nag. Nothing else.
import { Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { addTrainyardStacks, createApp } from '../lib/app';
import { ConfigError, DEFAULT_CONFIG_PATH, loadConfig } from '../lib/config';

const app = createApp();
const configPath = app.node.tryGetContext('config') as string | undefined;
try {
  addTrainyardStacks(app, loadConfig(configPath ?? DEFAULT_CONFIG_PATH, configPath !== undefined));
} catch (error) {
  if (error instanceof ConfigError) {
    console.error(error.message);
    process.exit(1);
  }
  throw error;
}
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
app.synth();
