"""Workarounds for third-party packages that do not work as installed (see each module)."""
