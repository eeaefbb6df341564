"""`python -m trainyard_harness -- <command...>` (local mode runs the harness from the source tree this way)."""

import sys

from trainyard_harness.main import main

sys.exit(main())
