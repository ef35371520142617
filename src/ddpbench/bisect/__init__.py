"""``ddpbench-bisect``: the first commit of a tool's range whose per-step cost exceeds the good commit's, each
commit measured by a ddpbench sweep of its own run as a child process (docs/versions.md)."""
