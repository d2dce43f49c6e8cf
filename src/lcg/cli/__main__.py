"""`python -m lcg.cli`: the same entry point as the `lcg` script."""

from lcg.cli.entry import main

main()
