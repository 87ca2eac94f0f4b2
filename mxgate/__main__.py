import sys

from mxgate.cli import main

sys.exit(main())
