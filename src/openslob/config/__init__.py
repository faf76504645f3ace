"""Options and slob.conf: one declarative table, no CLI."""
