"""What the user did with the decisions: the ledger, retention, the adaptive threshold, stats."""
