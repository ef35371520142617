"""The static backend (``cluster.kind: static``): one ddpbench driver per node, in lockstep, no scheduler."""
