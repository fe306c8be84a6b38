"""`python -m chatparse.cli`: the `chatparse` command."""

import sys

from chatparse.cli import main

sys.exit(main())
