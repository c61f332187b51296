"""`python -m tahoe` runs the CLI."""

from .cli import main

main()
