"""Training: the recipe (one readable loop), parameters, strategies, checkpoints."""
