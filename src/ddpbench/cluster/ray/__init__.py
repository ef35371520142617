"""The Ray backend (``cluster.kind: ray``): a trial's node agents as actors of a placement group on a Ray cluster."""
