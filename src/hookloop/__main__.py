"""``python -m hookloop`` runs the ``hookloop`` command."""

import sys

from .cli import main

sys.exit(main())
