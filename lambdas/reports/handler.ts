/** Lambda entry: the scheduled showback reports (EventBridge schedules, daily and weekly). */

import { awsControlPlane } from '../shared/aws-control-plane';
import { createReportsHandler } from './reports';

/** The Lambda handler. */
export const handler = createReportsHandler(awsControlPlane());
