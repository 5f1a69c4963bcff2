"""Build the `recoe` dataset (six configs) in Hub layout:

`python -m builders.recoe --out DIR [--version X.Y.Z] [--seed N]`.
"""

import sys

from recoe_causaldiag.cli import main

if __name__ == "__main__":
    sys.exit(main(["build", "recoe", *sys.argv[1:]]))
