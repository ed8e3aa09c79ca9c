"""Offline layer: fixtures in, deterministic out/ files out (record lives here too)."""
