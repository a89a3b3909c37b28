"""Training room: the one loop (loop.py), one optimisation step (step.py), the method interface
(recipe.py) and the methods (methods/), checkpoints, the run folder's safety, processes."""
