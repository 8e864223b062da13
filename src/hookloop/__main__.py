"""``python -m hookloop`` runs the ``hookloop`` command."""

import sys

from ._cli import main

sys.exit(main())
