"""`python -m xccl`: see xccl.cli."""

from xccl.cli import main

raise SystemExit(main())
