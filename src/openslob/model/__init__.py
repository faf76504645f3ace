"""The results model: metrics table, histogram, combining rules, errors."""
