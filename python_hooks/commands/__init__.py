"""What each command of `python -m python_hooks` does, one module per command (python_hooks/cli.py
calls them)."""
