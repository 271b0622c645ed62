"""``python -m benchwatch_client``: the same as ``benchwatch-upload``."""

import sys

from benchwatch_client.cli import main

sys.exit(main())
