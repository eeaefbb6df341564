/** The one logger (Powertools, bundled): JSON lines; job id and team are appended as keys where known. */
import { Logger } from '@aws-lambda-powertools/logger';

/** Shared logger instance; never logs events (they can hold user data). Level from POWERTOOLS_LOG_LEVEL. */
export const logger = new Logger({ serviceName: 'trainyard' });
