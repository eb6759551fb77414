"""The single controller: the training loop, its config, and where each role's actors go."""
