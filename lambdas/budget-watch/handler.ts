/** Lambda entry: the 5-minute budget and placement watch (EventBridge schedule). */

import { awsControlPlane } from '../shared/aws-control-plane';
import { stdoutMetricPublisher } from '../shared/metrics';
import { createBudgetWatchHandler } from './budget-watch';

/** The Lambda handler. */
export const handler = createBudgetWatchHandler(awsControlPlane({ metrics: stdoutMetricPublisher }));
