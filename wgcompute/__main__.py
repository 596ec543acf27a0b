"""`python -m wgcompute` runs the command line (same as the `wgcompute` script)."""

import sys

from wgcompute.cli import main

sys.exit(main())
