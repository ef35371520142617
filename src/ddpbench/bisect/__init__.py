"""``ddpbench-bisect``: the first commit of a tool's range whose per-step cost exceeds the good commit's.

An application beside ``ddpbench.app``: each commit it measures is a ddpbench sweep of its own (the mode at
the good commit and at this one, paired, a pair more per look until the verdict is known), which it runs as
a child process and reads back from the trial records. docs/versions.md describes the search and the rule.
"""
