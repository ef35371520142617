"""Pairs, statistics, verdicts, calibration, caveats and provenance: pure functions of the collected table."""
