"""Training room: the one loop of the transformer methods (loop.py), one optimisation step (step.py),
the recipe interface (recipe.py: a batch builder plus an objective) and the recipes (recipes/:
DeCLUTR, MLM, SimCSE, TSDAE), checkpoints, the run folder's safety, processes. The registry of every
method, transformer or not, is `sentkit.methods`."""
