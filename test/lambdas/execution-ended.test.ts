// The "Step Functions Execution Status Change" schema against AWS's documented shape, and local mode's event against
// the same schema. The handler's paths run end to end on the synthesized state machine in test/lifecycle/paths.test.ts.
import { describe, expect, it } from 'vitest';
import { executionEndedReason } from '../../lambdas/execution-ended/execution-ended';
import { InvalidEvent, parseExecutionStatusChangeEvent } from '../../lambdas/shared/event-schemas';
import { executionStatusChangeEvent, LOCAL_STATE_MACHINE_ARN } from '../../lib/local/local-mode';
import { fixture, fixtureWith } from './event-bench';

describe('Step Functions Execution Status Change', () => {
  it('reads the documented event: execution, job id (its name), status, stop date, error and cause', () => {
    expect(parseExecutionStatusChangeEvent(fixture('execution-aborted'))).toEqual({
      eventId: '3b1c7f2e-9d4a-4f6b-8a2c-5e7d9f1a3c5b',
      timeMs: Date.parse('2026-11-20T14:41:07Z'),
      executionArn: 'arn:aws:states:us-east-1:123456789012:execution:TrainyardJobs:01JDA7Q6ZK3V8N2M4P5R6S7T8W',
      stateMachineArn: 'arn:aws:states:us-east-1:123456789012:stateMachine:TrainyardJobs',
      name: '01JDA7Q6ZK3V8N2M4P5R6S7T8W',
      status: 'ABORTED',
      stopDateMs: 1795185667250,
      error: 'Operator',
      cause: 'stopped from the console',
    });
  });

  it('accepts a failure without error or cause (null), and refuses a status Step Functions does not report', () => {
    const plain = fixtureWith('execution-aborted', (e) => {
      e.detail.error = null;
      e.detail.cause = null;
      e.detail.status = 'TIMED_OUT';
    });
    const parsed = parseExecutionStatusChangeEvent(plain);
    expect(parsed).not.toHaveProperty('error');
    expect(executionEndedReason(parsed)).toBe('its lifecycle execution timed out before the job was finalized');
    const odd = fixtureWith('execution-aborted', (e) => {
      e.detail.status = 'CANCELLED';
    });
    expect(() => parseExecutionStatusChangeEvent(odd)).toThrow(InvalidEvent);
    expect(() => parseExecutionStatusChangeEvent(odd)).toThrow(
      'detail.status: must be one of RUNNING, SUCCEEDED, PENDING_REDRIVE, FAILED, TIMED_OUT, ABORTED',
    );
  });

  it('builds local mode’s event with the documented detail keys, which the same schema reads', () => {
    const documented = fixture('execution-aborted') as { detail: Record<string, unknown> };
    const local = executionStatusChangeEvent(
      { name: '01JDA7Q6ZK3V8N2M4P5R6S7T8W', status: 'FAILED', startDate: 1, stopDate: 2, error: 'States.TaskFailed' },
      Date.parse('2026-11-20T14:41:07Z'),
    );
    expect(Object.keys(local.detail).every((key) => key in documented.detail)).toBe(true);
    expect(Object.keys(local).sort()).toEqual(Object.keys(documented).sort());
    expect(parseExecutionStatusChangeEvent(local)).toMatchObject({
      stateMachineArn: LOCAL_STATE_MACHINE_ARN,
      name: '01JDA7Q6ZK3V8N2M4P5R6S7T8W',
      status: 'FAILED',
      stopDateMs: 2,
      error: 'States.TaskFailed',
    });
  });
});
