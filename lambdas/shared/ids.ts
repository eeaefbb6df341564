import { randomBytes } from 'node:crypto';

/** A new job id: time-ordered (base-36 milliseconds) plus 48 random bits, valid as a Step Functions execution name. */
export function newJobId(now: Date = new Date()): string {
  return `j${now.getTime().toString(36)}${randomBytes(6).toString('hex')}`;
}
