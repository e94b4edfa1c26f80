"""Studies: accuracy figures on real data, and figures of the code itself
(`python -m studies.NAME --help`, from the repository root). See scripts/README.md."""
