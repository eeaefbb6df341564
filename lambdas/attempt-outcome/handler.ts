// Lambda entry for the job state machine's attempt-outcome step: the step's logic lives in lambdas/lifecycle/attempt-outcome.ts.

import { createAttemptOutcomeHandler } from '../lifecycle/attempt-outcome';
import { awsControlPlane } from '../shared/aws-control-plane';
import { stdoutMetricPublisher } from '../shared/metrics';

export const handler = createAttemptOutcomeHandler(awsControlPlane({ metrics: stdoutMetricPublisher }));
