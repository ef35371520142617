"""Tool versions side by side (``versions=``): specs, one cached environment per version, each arm's command.

Below the trial layer: the trial asks it for an arm's interpreter and command; the sweep driver asks it to
build every environment before the first trial. Method and cache: docs/versions.md.
"""
