"""`python -m xlapy run FILE...`: the same as the `xlapy` command."""

import sys

from xlapy.cli.main import main

sys.exit(main())
