"""`python -m xccl.tune` (also `python -m xccl tune`)."""

from xccl.tune import main

raise SystemExit(main())
