"""The words every layer shares: route kinds, positions, the decision record, user errors."""
