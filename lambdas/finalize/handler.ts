// Lambda entry for the job state machine's finalize step: the step's logic lives in lambdas/lifecycle/finalize.ts.

import { createFinalizeHandler } from '../lifecycle/finalize';
import { awsControlPlane } from '../shared/aws-control-plane';
import { stdoutMetricPublisher } from '../shared/metrics';

export const handler = createFinalizeHandler(awsControlPlane({ metrics: stdoutMetricPublisher }));
