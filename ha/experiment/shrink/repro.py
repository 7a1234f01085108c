"""Placeholder replaced below."""
def write_repro(run_dir, out, predicate):
    return {"written": False, "why": "not implemented"}
