"""The run lifecycle, sweeps and calibration: engine-independent."""
