"""The per-run host: the bridge of tool calls, catalog, limits, validation, approval, type checks, telemetry."""
