/** A Batch SubmitJob request as the job state machine's RunAttempt Task resolves it (Step Functions' PascalCase). */
export interface SubmitJobInput {
  readonly JobName: string;
  readonly JobQueue: string;
  readonly JobDefinition: string;
  readonly ShareIdentifier?: string;
  /** A single-node job's command and environment. */
  readonly ContainerOverrides?: ContainerOverrides;
  /**
   * A multi-node parallel job's (Batch refuses ContainerOverrides for one): the same command and environment for
   * every node, `TargetNodes: '0:'`. The RunMultiNodeAttempt Task passes it as SubmitJob's nodeOverrides.
   */
  readonly NodeOverrides?: {
    readonly NodePropertyOverrides: ReadonlyArray<{
      readonly TargetNodes: string;
      readonly ContainerOverrides: ContainerOverrides;
    }>;
  };
  readonly Timeout?: { readonly AttemptDurationSeconds: number };
  readonly Tags?: Record<string, string>;
  readonly PropagateTags?: boolean;
}

/** The command and environment a SubmitJob request overrides. */
export interface ContainerOverrides {
  readonly Command?: string[];
  readonly Environment?: Array<{ readonly Name: string; readonly Value: string }>;
}

/** What every node of the request runs: its ContainerOverrides, or its multi-node overrides of node 0 onwards. */
export function containerOverridesOf(input: SubmitJobInput): ContainerOverrides {
  return input.ContainerOverrides ?? input.NodeOverrides?.NodePropertyOverrides[0]?.ContainerOverrides ?? {};
}

/**
 * Words joined into one string that a POSIX shell (and Python's `shlex.split`, which the harness reads
 * TRAINYARD_RESUME_ARGS with) splits back into exactly these words: a word with anything but safe characters is
 * single-quoted, its own single quotes written as '\''.
 */
export function shellJoin(words: readonly string[]): string {
  return words.map((w) => (/^[A-Za-z0-9_\-=.,:/@%+]+$/.test(w) ? w : `'${w.replaceAll("'", "'\\''")}'`)).join(' ');
}
