"""python3 -m oneflow.distributed.plan: see cli.py."""
import sys

from oneflow.distributed.plan.cli import main

if __name__ == "__main__":
    sys.exit(main())
