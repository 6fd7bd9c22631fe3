"""A rank for launcher tests: rank 1 kills itself with SIGKILL, as the OOM killer would; the
others wait to be stopped."""

import os
import signal
import time

if os.environ.get("RANK") == "1":
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(60)
