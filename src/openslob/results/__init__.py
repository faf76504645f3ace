"""run.json: building it, the run directory, finding runs, data-set health."""
