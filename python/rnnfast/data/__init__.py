"""Data helpers (temporary until merge)."""
