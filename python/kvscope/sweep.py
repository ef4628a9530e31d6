# SPDX-License-Identifier: GPL-3.0-or-later
"""python3 -m kvscope.sweep DUMP… --preset NAME … --out results.csv [--scheduler tcp://host:8786]

Runs kvscope.sweep from a shell (docs/python.md); the work lives in kvscope._sweep.
"""
import sys

from kvscope._sweep import main

if __name__ == "__main__":
    sys.exit(main())
