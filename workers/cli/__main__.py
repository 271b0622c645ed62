"""``python -m workers.cli``: the ``benchwatch`` command."""

import sys

from workers.cli import main

sys.exit(main())
