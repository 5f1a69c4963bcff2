"""Build the `object_counting` dataset in Hub layout:

`python -m builders.object_counting --out DIR [--version X.Y.Z] [--seed N]`.
"""

import sys

from recoe_causaldiag.cli import main

if __name__ == "__main__":
    sys.exit(main(["build", "object_counting", *sys.argv[1:]]))
