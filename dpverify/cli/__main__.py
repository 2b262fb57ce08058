"""``python -m dpverify.cli``: the ``dpverify`` command."""

import sys

from dpverify.cli.app import main

sys.exit(main())
