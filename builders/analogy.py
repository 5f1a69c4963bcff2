"""Build the `analogy` dataset in Hub layout: `python -m builders.analogy --out DIR [--version X.Y.Z] [--seed N]`."""

import sys

from recoe_causaldiag.cli import main

if __name__ == "__main__":
    sys.exit(main(["build", "analogy", *sys.argv[1:]]))
