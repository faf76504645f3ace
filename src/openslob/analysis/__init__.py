"""Analyses over runs: the awr_info table, events, degradation."""
