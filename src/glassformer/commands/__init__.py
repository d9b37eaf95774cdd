"""One module per CLI subcommand; each defines `register(app)` (see glassformer/cli.py)."""
