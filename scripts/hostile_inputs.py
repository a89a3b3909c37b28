#!/usr/bin/env python
"""Feed hostile inputs (empty, whitespace-only, binary, latin-1, UTF-16, NUL-byte, giant-line and
malformed-JSONL files) to every sentkit command that reads files; print command x input -> exit
status, verdict and the first error line. Tracebacks, internal errors and exit 0 with garbage are
flagged with !! and make the script exit 1.

    .venv/bin/python scripts/hostile_inputs.py                      # every command, in-process
    .venv/bin/python scripts/hostile_inputs.py --subprocess         # each case as a new process
    .venv/bin/python scripts/hostile_inputs.py --commands embed,prepare --giant-mb 1

The cases live in sentkit.cli.hostile (the test suite's tests/hostile runs the same ones).
"""

from __future__ import annotations

import sys

from sentkit.cli.hostile import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
