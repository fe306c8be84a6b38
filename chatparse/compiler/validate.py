"""Load-time validation of ``response_template`` dicts: the rules live in the runtime
(`chatparse.runtime.tables.validate`), which also checks the template section of every table file it loads; the
compiler uses them from there."""

from ..runtime.tables.validate import canonical_json, check_normalized, load_template

__all__ = ["load_template", "check_normalized", "canonical_json"]
