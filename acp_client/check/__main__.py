"""``python -m acp_client.check TARGET [options]`` (the same as ``acp-reconnect check``)."""

import sys

from ._cli import check_main

sys.exit(check_main())
