"""Versioned JSON formats: one module per format (writer, validator, reader of every earlier version)."""
