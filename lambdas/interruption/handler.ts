/** Lambda entry: EC2 spot interruption warnings (EventBridge, default bus). */

import { awsControlPlane } from '../shared/aws-control-plane';
import { stdoutMetricPublisher } from '../shared/metrics';
import { createInterruptionHandler } from './interruption';

/** The Lambda handler. */
export const handler = createInterruptionHandler(awsControlPlane({ metrics: stdoutMetricPublisher }));
