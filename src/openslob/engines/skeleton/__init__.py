"""A documented skeleton engine plug-in (not registered): see plugin.py."""
