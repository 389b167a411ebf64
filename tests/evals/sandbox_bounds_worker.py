"""A worker process for ``test_sandbox_bounds.py``: runs each named program of ``PROGRAMS``
through ``run_unit_tests`` and prints one JSON line per result, then a plain evaluation (the
worker still works). Run as an unprivileged uid by the test; standard library only, so the
system interpreter can run it."""

import json
import sys
import time

from evals.sandbox import run_unit_tests

GOOD = "def inc(x):\n    return x + 1\n"
PROGRAMS = {
    "fork bomb": (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    ),
    "8 children of 200 MB": (
        "import os, time\n"
        "for _ in range(8):\n"
        "    if os.fork() == 0:\n"
        "        data = b'\\x01' * (200 << 20)\n"
        "        time.sleep(30)\n"
        "        os._exit(0)\n"
        "time.sleep(30)\n"
    ),
    "/dev/shm filler": (  # files of 8 MB, under the file-size limit, up to 1 GiB in all
        "chunk = b'\\x01' * (1 << 20)\n"
        "for i in range(128):\n"
        "    with open(f'/dev/shm/fill{i}', 'wb') as f:\n"
        "        for _ in range(8):\n"
        "            f.write(chunk)\n"
        "            f.flush()\n"
    ),
}
CHAIN_MARKER = "tierwatch-test-chain-5d1e"
# each link leaves its session and, when its child dies, starts another; the source makes
# itself again in each new interpreter (``SRC`` is this text)
LINK = (
    "import os, sys, time\n"
    "marker, n = sys.argv[1], int(sys.argv[2])\n"
    "again = 'SRC = ' + repr(SRC) + '\\n' + SRC\n"
    "child = None\n"
    "while True:\n"
    "    if n > 0 and (child is None or os.waitpid(child, os.WNOHANG)[0]):\n"
    "        child = os.fork()\n"
    "        if child == 0:\n"
    "            os.setsid()\n"
    "            os.execv(sys.executable, [sys.executable, '-c', again, marker, str(n - 1)])\n"
    "    time.sleep(0.02)\n"
)
# a chain of 5, then the judge (the parent) killed: as the same uid, the code can
PROGRAMS["self-healing chain"] = (
    "import os, sys, time\n"
    f"SRC = {LINK!r}\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    again = 'SRC = ' + repr(SRC) + '\\n' + SRC\n"
    f"    os.execv(sys.executable, [sys.executable, '-c', again, {CHAIN_MARKER!r}, '5'])\n"
    "time.sleep(1.0)\n"
    "os.kill(os.getppid(), 9)\n"
    "time.sleep(1.0)\n"
)

# the fork bomb's only end is the deadline; the others must have time to meet their limit
TIMEOUT_S = {"fork bomb": 4.0, "8 children of 200 MB": 20.0, "/dev/shm filler": 20.0}
TIMEOUT_S["self-healing chain"] = 10.0


def main() -> None:
    mode = sys.argv[1]
    for name in sys.argv[2:]:
        started = time.perf_counter()
        result = run_unit_tests(
            PROGRAMS[name], "assert True\n", timeout_s=TIMEOUT_S[name], mode=mode
        )
        seconds = time.perf_counter() - started
        line = {"program": name, "passed": result.passed, "error": result.error_class}
        line.update(seconds=round(seconds, 2), output=result.output[:300])
        print(json.dumps(line), flush=True)
    after = run_unit_tests(GOOD, "assert inc(1) == 2\n", mode=mode)
    print(json.dumps({"program": "plain", "passed": after.passed, "error": after.error_class}))


if __name__ == "__main__":
    main()
