"""Lets `python -m stormdeck` run the command line."""

from stormdeck.cli import main

raise SystemExit(main())
