"""`python -m codefu ...` is the `codefu` command."""

import sys

from codefu.cli import main

sys.exit(main())
