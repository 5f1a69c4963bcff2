"""Build the `factcheck` dataset in Hub layout:

`python -m builders.factcheck --out DIR [--version X.Y.Z] [--seed N] [--counterfact FILE]`.
"""

import sys

from recoe_causaldiag.cli import main

if __name__ == "__main__":
    sys.exit(main(["build", "factcheck", *sys.argv[1:]]))
