"""Presets of public video DiTs: one TOML file each (models/registry.py reads them)."""
