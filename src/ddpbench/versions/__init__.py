"""Tool versions side by side (``versions=``): specs, one cached environment per version, each arm's command
(docs/versions.md)."""
