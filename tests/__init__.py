"""srljax's tests (a package, so `tests.*` imports find these files before any installed package named `tests`: pgx 2.6.0 ships one)."""
