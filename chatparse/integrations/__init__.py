"""Integrations with other libraries (imported on demand; chatparse itself does not need them)."""
