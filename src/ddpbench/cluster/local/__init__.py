"""The local backend (``cluster.kind: local``): every node agent of a trial on this host."""
