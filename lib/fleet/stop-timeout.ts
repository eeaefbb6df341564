/**
 * Seconds ECS waits between SIGTERM and SIGKILL when it stops a container on the GPU hosts (ECS_CONTAINER_STOP_TIMEOUT
 * in their launch template; local mode waits as long). The spot warning is 120 s; the interruption function calls
 * TerminateJob within seconds of the notice, so 110 s lets the harness signal the training process, wait for its
 * checkpoint and upload it before the instance is reclaimed. A module of its own, so local mode reads it without the
 * CDK's EC2 constructs.
 */
export const CONTAINER_STOP_TIMEOUT_SECONDS = 110;
