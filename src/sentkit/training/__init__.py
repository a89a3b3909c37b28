"""Training room: the DeCLUTR loop, its schedule, checkpoints and distributed helpers."""
