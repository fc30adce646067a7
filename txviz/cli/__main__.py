"""``python -m txviz.cli``: the same command line as the ``txviz`` script."""

import sys

from txviz.cli import main

sys.exit(main())
