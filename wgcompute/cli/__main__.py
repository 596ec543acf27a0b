import sys

from wgcompute.cli import main

sys.exit(main())
