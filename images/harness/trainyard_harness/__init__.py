"""Trainyard job harness: runs a user's training command with checkpoint restore, sync and interruption handling."""

EXIT_OK = 0
EXIT_CHECKPOINTED = 75  # interrupted (spot notice or SIGTERM/SIGINT), final sync done: resume me
EXIT_RESUME_FAILED = 76  # failed before any progress after a restore; that checkpoint is marked: run me again
EXIT_BAD_CONFIG = 78  # settings or command invalid
EXIT_INFRASTRUCTURE = 79  # code bundle or storage unreachable
RESERVED_EXIT_CODES = frozenset({EXIT_CHECKPOINTED, EXIT_RESUME_FAILED, EXIT_BAD_CONFIG, EXIT_INFRASTRUCTURE})
