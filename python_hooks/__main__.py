"""`python -m python_hooks`: the command line (python_hooks/cli.py)."""

from python_hooks.cli import main

if __name__ == "__main__":
    main()
