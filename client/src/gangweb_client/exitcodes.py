"""The `gangweb` command's exit codes. Stable: scripts and CI steps depend on them."""

OK = 0  # every job Succeeded (or, for commands that do not wait, the command did what it was asked)
FAILED = 1  # at least one job Failed
CANCELLED = 2  # at least one job Cancelled, none Failed
TIMEOUT = 3  # --timeout passed before every job finished
USAGE = 4  # bad flags or input, or the server refused the request (4xx): the message names the field
SERVER_ERROR = 5  # the server or the network failed after every retry (5xx, connection refused, timeouts)

NAMES = {OK: "succeeded", FAILED: "failed", CANCELLED: "cancelled", TIMEOUT: "timeout", USAGE: "usage or input error",
         SERVER_ERROR: "server or network error"}
