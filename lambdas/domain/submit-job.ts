/** A Batch SubmitJob request as the job state machine's RunAttempt Task resolves it (Step Functions' PascalCase). */
export interface SubmitJobInput {
  readonly JobName: string;
  readonly JobQueue: string;
  readonly JobDefinition: string;
  readonly ShareIdentifier?: string;
  readonly ContainerOverrides?: {
    readonly Command?: string[];
    readonly Environment?: Array<{ readonly Name: string; readonly Value: string }>;
  };
  readonly Timeout?: { readonly AttemptDurationSeconds: number };
  readonly Tags?: Record<string, string>;
  readonly PropagateTags?: boolean;
}
