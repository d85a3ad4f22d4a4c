"""`python -m dumpgym` runs the command line."""
from dumpgym.cli import main

raise SystemExit(main())
