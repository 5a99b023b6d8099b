"""The layer classes of oneflow.nn, one family per file (exported from oneflow.nn)."""
