"""The Kubernetes matchers several plugins share (``component-helpers/scheduling/corev1`` and
``v1.Toleration.ToleratesTaint``): a toleration against a taint, a selector requirement against a
label, a node selector term against a node. Pure functions of the objects' dicts; the predicates
plugin filters with them, nodeorder scores preferred terms and taints with them, and the
inter-pod affinity plugin matches label selectors with them.
"""
from __future__ import annotations

__all__ = ["tolerates", "match_expression", "term_matches"]


def tolerates(tolerations: list[dict], taint: dict) -> bool:
    """v1.Toleration.ToleratesTaint for any of ``tolerations``."""
    for tol in tolerations or ():
        effect = tol.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = tol.get("key") or ""
        op = tol.get("operator") or "Equal"
        if key and key != taint.get("key"):
            continue
        if op == "Exists":
            return True
        if op == "Equal" and (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def match_expression(expr: dict, value: str | None, present: bool) -> bool:
    """One ``matchExpressions`` / ``matchFields`` requirement (In, NotIn, Exists, DoesNotExist,
    Gt, Lt) against a label value (``present``: whether the label exists)."""
    op = expr.get("operator")
    values = expr.get("values") or []
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        try:
            lv, rv = int(value), int(values[0])
        except (TypeError, ValueError):
            return False
        return lv > rv if op == "Gt" else lv < rv
    return False


def term_matches(term: dict, labels: dict, node_name: str) -> bool:
    """A ``NodeSelectorTerm``: every expression on the labels, every field on the node's name."""
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term matches no objects
    for e in exprs:
        k = e.get("key")
        if not match_expression(e, labels.get(k), k in labels):
            return False
    for f in fields:
        if f.get("key") != "metadata.name" or not match_expression(f, node_name, True):
            return False
    return True
