"""Trainyard job harness: runs a user's training command with checkpoint restore, sync and interruption handling."""

EXIT_OK = 0
EXIT_CHECKPOINTED = 75  # interrupted (spot notice or SIGTERM/SIGINT), final sync done: resume me
EXIT_BAD_CONFIG = 78  # settings or command invalid
EXIT_INFRASTRUCTURE = 79  # code bundle or storage unreachable
RESERVED_EXIT_CODES = frozenset({EXIT_CHECKPOINTED, EXIT_BAD_CONFIG, EXIT_INFRASTRUCTURE})
