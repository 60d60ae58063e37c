"""`python -m xccl.bench`: see xccl.bench."""

from xccl.bench import main

if __name__ == "__main__":  # not when a spawned rank re-imports the main module
    raise SystemExit(main())
