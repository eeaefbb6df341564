/** Lambda entry: the job state machine's executions that ended without Finalize (EventBridge, default bus). */

import { awsControlPlane } from '../shared/aws-control-plane';
import { stdoutMetricPublisher } from '../shared/metrics';
import { createExecutionEndedHandler } from './execution-ended';

/** The Lambda handler. */
export const handler = createExecutionEndedHandler(awsControlPlane({ metrics: stdoutMetricPublisher }));
