"""One rule per gate: code, docs, check, fix, examples."""
