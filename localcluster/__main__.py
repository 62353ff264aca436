"""``python -m localcluster up|down|status|build``: the same command as ``manage.py localcluster``, without Django."""

import sys

from .cli import main

sys.exit(main())
