/**
 * Runs the job state machine locally with aws-local-stepfunctions: the synthesized definition, Task states bound by
 * name to the same handlers the Lambdas run, RunAttempt bound to local Batch, and the task tokens PausedForBudget and
 * Backoff wait on honoured in-process. Implements the LifecycleControl port, so the API starts and resumes executions exactly as on
 * AWS.
 */
import './polyfills';
import { ExecutionAbortedError, StateMachine } from 'aws-local-stepfunctions';
import type { LifecycleControl } from '../../lambdas/shared/ports';
import { STATE_NAMES } from '../lifecycle/job-state-machine';
import type { StateMachineDefinition } from './definition';
import type { LocalBatch, SubmitJobInput } from './local-batch';

/** A step handler: JSON in, JSON out (exactly what the Lambda receives and returns). */
export type StepHandler = (input: unknown) => Promise<unknown>;

/** The handlers behind the lifecycle's Lambda Tasks. */
export interface LocalStepHandlers {
  readonly analyze: StepHandler;
  readonly costGate: StepHandler;
  readonly prepareAttempt: StepHandler;
  readonly attemptOutcome: StepHandler;
  readonly pause: StepHandler;
  readonly backoff: StepHandler;
  readonly finalize: StepHandler;
}

/** One execution event, as aws-local-stepfunctions reports it. */
export type ExecutionEvent = { type: string; timestamp: number; state?: { name: string; type: string } } & Record<
  string,
  unknown
>;

/** An execution that ended without succeeding, as Step Functions reports it on EventBridge. */
export interface EndedExecution {
  readonly name: string;
  readonly status: 'FAILED' | 'ABORTED';
  /** Epoch ms. */
  readonly startDate: number;
  readonly stopDate: number;
  readonly error?: string;
  readonly cause?: string;
}

/** What is known about one execution. */
export interface LocalExecution {
  readonly name: string;
  status: 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'ABORTED';
  output?: unknown;
  error?: string;
  /** What `onExecutionEnded` threw, if it did. */
  endedHandlerError?: string;
  readonly events: ExecutionEvent[];
  /** Settles when the execution has ended and `onExecutionEnded` has run (never rejects). */
  readonly done: Promise<void>;
}

/** Options for the local runner. */
export interface LocalStateMachineOptions {
  readonly definition: StateMachineDefinition;
  readonly steps: LocalStepHandlers;
  readonly batch: LocalBatch;
  /**
   * End the Backoff Task's wait after this many ms (tests: 0), as a task success would. @default - the real wait: the
   * Task times out after the plan's delaySeconds (its TimeoutSecondsPath)
   */
  readonly backoffWaitMs?: number;
  /** Replace Task retry intervals with this many ms (tests: 0). @default - the definition's intervals */
  readonly retryIntervalMs?: number;
  /** Called for every execution event (local mode prints progress from it). */
  readonly onEvent?: (execution: string, event: ExecutionEvent) => void;
  /**
   * Called when an execution fails or is stopped, as EventBridge's "Step Functions Execution Status Change" would
   * reach the execution-ended handler on AWS.
   */
  readonly onExecutionEnded?: (ended: EndedExecution) => Promise<unknown>;
  /** Clock for the execution dates. @default Date.now */
  readonly now?: () => number;
}

/**
 * Longest Task timeout the local engine can honour: Node timers overflow past 2^31-1 ms (they then fire at once).
 * Step Functions' own default for a Task without TimeoutSeconds is 99999999 s; any attempt ends long before either.
 */
export const LOCAL_TASK_TIMEOUT_SECONDS = Math.floor((2 ** 31 - 1) / 1000);

/** Where {@link withAwsTaskTimeouts} carries a TimeoutSecondsPath's value into a Task's effective input. */
export const LOCAL_TIMEOUT_PARAMETER = 'TrainyardLocalTimeoutSeconds';

/**
 * The definition as the local engine must run it to behave like Step Functions, in two ways; nothing else changes,
 * and the synthesized definition itself is left as it is.
 * - aws-local-stepfunctions times out a Task that states no TimeoutSeconds after 60 s, where Step Functions waits
 *   (its default is 99999999 s), so a RunAttempt longer than a minute would fail with States.Timeout. Such Tasks get
 *   {@link LOCAL_TASK_TIMEOUT_SECONDS}.
 * - It resolves a Task's TimeoutSecondsPath against the effective input (what Parameters made of the state input),
 *   where Step Functions resolves it against the state input itself, so `$.plan.delaySeconds` would not be found.
 *   Parameters gain {@link LOCAL_TIMEOUT_PARAMETER}, taken from the path, and the Task times out on that.
 */
export function withAwsTaskTimeouts(definition: StateMachineDefinition): StateMachineDefinition {
  const states = Object.fromEntries(
    Object.entries(definition.States).map(([name, state]) => {
      if (state.Type !== 'Task') return [name, state];
      if (state.TimeoutSecondsPath !== undefined && state.Parameters !== undefined) {
        const parameters = { ...state.Parameters, [`${LOCAL_TIMEOUT_PARAMETER}.$`]: state.TimeoutSecondsPath };
        return [name, { ...state, Parameters: parameters, TimeoutSecondsPath: `$.${LOCAL_TIMEOUT_PARAMETER}` }];
      }
      if (state.TimeoutSeconds === undefined && state.TimeoutSecondsPath === undefined) {
        return [name, { ...state, TimeoutSeconds: LOCAL_TASK_TIMEOUT_SECONDS }];
      }
      return [name, state];
    }),
  );
  return { ...definition, States: states };
}

/** Raised by sendTaskSuccess for a token no paused execution holds. */
export class TaskDoesNotExist extends Error {
  override name = 'TaskDoesNotExist';
}

/** Ends a token wait that local mode's stop abandoned (LocalStateMachine.abandon). */
export class ExecutionAbandoned extends Error {
  override name = 'ExecutionAbandoned';
}

/** The job state machine running in this process. */
export class LocalStateMachine implements LifecycleControl {
  private readonly machine: StateMachine;
  private readonly executions = new Map<string, LocalExecution>();
  private readonly aborts = new Map<string, { abort: () => void; error?: string; cause?: string }>();
  private readonly waiting = new Map<string, (output: unknown) => void>();
  /** The token waits in progress, by token, with how to end one unsent (abandon). */
  private readonly unsent = new Map<string, (error: Error) => void>();
  private abandoned = false;
  private tokenCounter = 0;

  constructor(private readonly options: LocalStateMachineOptions) {
    // The engine annotates the object it is given (QueryLanguage on every state): it gets its own copy, with the
    // Task timeouts Step Functions applies.
    const definition = structuredClone(withAwsTaskTimeouts(options.definition));
    this.machine = new StateMachine(definition as never, { validationOptions: { checkPaths: true } });
  }

  /** StartExecution: a name already used is not an error (as ExecutionAlreadyExists is to the API). */
  async startExecution(name: string, input: Record<string, unknown>): Promise<{ alreadyStarted: boolean }> {
    if (this.executions.has(name)) return { alreadyStarted: true };
    const { steps, batch } = this.options;
    const run = (submit: unknown) => batch.runJob(submit as SubmitJobInput);
    /**
     * A waitForTaskToken Task: the step runs with a fresh token and the Task waits until the token is sent. `ends`
     * says when the token stops being valid, as the Task's timeout would make it on AWS, and with what output the
     * wait ends then, if it does so itself rather than through the engine's timeout.
     */
    const waitOnToken =
      (step: StepHandler, ends?: (payload: Record<string, unknown>) => { afterMs: number; output?: unknown }) =>
      async (payload: unknown) => {
        this.tokenCounter += 1;
        const taskToken = `local-task-${name}-${this.tokenCounter}`;
        const resumed = new Promise<unknown>((resolve, reject) => {
          this.waiting.set(taskToken, resolve);
          this.unsent.set(taskToken, reject);
        });
        resumed.then(
          () => this.unsent.delete(taskToken),
          () => this.unsent.delete(taskToken),
        );
        // The Task's Parameters are a lambda:invoke request: { FunctionName, Payload: { jobId, taskToken, … } }.
        const request = (payload as { Payload?: Record<string, unknown> }).Payload ?? {};
        try {
          await step({ ...request, taskToken });
        } catch (error) {
          // The Task failed: its retry waits under a new token, and this one will never be sent.
          this.waiting.delete(taskToken);
          this.unsent.delete(taskToken);
          throw error;
        }
        const end = ends?.(request);
        if (end) {
          setTimeout(() => {
            const resolve = this.waiting.get(taskToken);
            this.waiting.delete(taskToken);
            if (resolve && end.output !== undefined) resolve(end.output);
          }, end.afterMs).unref();
        }
        return resumed;
      };
    const backoffWaitMs = this.options.backoffWaitMs;
    const backoff = waitOnToken(steps.backoff, (request) =>
      backoffWaitMs === undefined
        ? // The engine times the Task out after the delay (TimeoutSecondsPath); the token is spent then.
          { afterMs: Number(request.delaySeconds) * 1000 }
        : { afterMs: backoffWaitMs, output: { action: 'elapsed' } },
    );
    const n = STATE_NAMES;
    const handlers: Record<string, (input: unknown) => Promise<unknown>> = {
      [n.analyze]: steps.analyze,
      [n.costGate]: steps.costGate,
      [n.prepareAttempt]: steps.prepareAttempt,
      [n.attemptOutcome]: steps.attemptOutcome,
      [n.finalize]: steps.finalize,
      [n.runAttempt]: run,
      [n.runMultiNodeAttempt]: run,
      [n.pausedForBudget]: waitOnToken(steps.pause),
      [n.backoff]: backoff,
    };
    const taskStates = Object.keys(handlers);
    const execution = this.machine.run(input as never, {
      overrides: {
        taskResourceLocalHandlers: handlers as never,
        ...(this.options.retryIntervalMs !== undefined
          ? {
              retryIntervalOverrides: Object.fromEntries(
                taskStates.map((s) => [s, this.options.retryIntervalMs as number]),
              ),
            }
          : {}),
      },
      context: {
        Execution: { Id: `local:${name}`, Name: name, Input: input as never, StartTime: new Date().toISOString() },
        Task: { Token: `local-task-${name}` },
      },
    });
    const events: ExecutionEvent[] = [];
    const state: Omit<LocalExecution, 'done'> = { name, status: 'RUNNING', events };
    const now = this.options.now ?? Date.now;
    const startDate = now();
    this.aborts.set(name, { abort: () => execution.abort() });
    const done = (async () => {
      const collecting = (async () => {
        for await (const event of execution.eventLogs as AsyncGenerator<ExecutionEvent>) {
          events.push(event);
          this.options.onEvent?.(name, event);
        }
      })();
      let ended: EndedExecution | undefined;
      try {
        state.output = await execution.result;
        state.status = 'SUCCEEDED';
      } catch (error) {
        const stop = this.aborts.get(name);
        const aborted = error instanceof ExecutionAbortedError;
        state.status = aborted ? 'ABORTED' : 'FAILED';
        state.error = `${(error as Error).name}: ${(error as Error).message}`;
        const reported = aborted
          ? { error: stop?.error, cause: stop?.cause }
          : { error: (error as Error).name, cause: (error as Error).message };
        ended = {
          name,
          status: state.status as EndedExecution['status'],
          startDate,
          stopDate: now(),
          ...(reported.error ? { error: reported.error } : {}),
          ...(reported.cause ? { cause: reported.cause } : {}),
        };
      }
      this.aborts.delete(name);
      await collecting.catch(() => undefined);
      if (ended && this.options.onExecutionEnded && !this.abandoned) {
        try {
          await this.options.onExecutionEnded(ended);
        } catch (error) {
          state.endedHandlerError = `${(error as Error).name}: ${(error as Error).message}`;
        }
      }
    })();
    this.executions.set(name, Object.assign(state, { done }));
    return { alreadyStarted: false };
  }

  /**
   * StopExecution: the execution ends ABORTED where it is (a Task in flight is abandoned, as Step Functions abandons
   * a Lambda invocation; what a RunAttempt started keeps running). Unknown or ended executions: nothing to stop.
   */
  async stopExecution(name: string, details: { error?: string; cause?: string } = {}): Promise<boolean> {
    const running = this.aborts.get(name);
    if (!running) return false;
    Object.assign(running, details);
    running.abort();
    return true;
  }

  /**
   * At local mode's stop: every execution still running is left where it is, as a host that stops leaves Step
   * Functions' executions, and reports no end (the next start finalizes their jobs). Each is aborted and its token
   * wait ended unsent, so nothing of it keeps the process alive: the engine times a waiting Task (a retry's backoff
   * for up to an hour, a budget pause for weeks) with a timer only the Task's end clears.
   */
  abandon(): void {
    this.abandoned = true;
    for (const running of this.aborts.values()) running.abort();
    for (const [token, end] of this.unsent) {
      this.waiting.delete(token);
      end(new ExecutionAbandoned(`local mode stopped while this execution waited on task token ${token}`));
    }
    this.unsent.clear();
  }

  /** SendTaskSuccess: continues the paused execution holding the token. */
  async sendTaskSuccess(taskToken: string, output: Record<string, unknown>): Promise<void> {
    const resolve = this.waiting.get(taskToken);
    if (!resolve) throw new TaskDoesNotExist(`no paused execution holds task token ${taskToken}`);
    this.waiting.delete(taskToken);
    resolve(output);
  }

  /** The execution with this name, if started in this process. */
  execution(name: string): LocalExecution | undefined {
    return this.executions.get(name);
  }

  /** Waits for an execution to end. */
  async waitFor(name: string): Promise<LocalExecution> {
    const execution = this.executions.get(name);
    if (!execution) throw new Error(`no execution named ${name}`);
    await execution.done;
    return execution;
  }

  /** Executions still running. */
  running(): string[] {
    return [...this.executions.values()].filter((e) => e.status === 'RUNNING').map((e) => e.name);
  }
}
