"""`python -m trainyard_harness -- <command...>` (local mode runs the harness from the source tree this way)."""

from trainyard_harness.main import entry_point

entry_point()
