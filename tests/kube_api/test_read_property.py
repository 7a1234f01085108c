"""Property tests: malformed selectors, resourceVersions and list/watch options get a 400/422
Status and never crash the front; well-formed label selectors match like a reference evaluator."""
from __future__ import annotations

from urllib.parse import quote

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kube_api.resources import lookup
from kube_api.selectors import parse_fields, parse_labels
from kube_api.status import KubeError

from .read_helpers import get

PODS = lookup("", "v1", "pods")
junk = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
label_key = st.from_regex(r"[a-z]([a-z0-9.-]{0,8}[a-z0-9])?", fullmatch=True)
label_val = st.from_regex(r"([a-z0-9]([a-z0-9._-]{0,6}[a-z0-9])?)?", fullmatch=True)


@settings(max_examples=400, deadline=None)
@given(junk)
def test_label_parser_never_crashes(s):
    try:
        sel = parse_labels(s)
    except KubeError as e:
        assert e.code == 400 and e.reason == "BadRequest" and "labelSelector" in e.message
    else:
        sel.matches({"metadata": {"labels": {"a": "b"}}})


@settings(max_examples=400, deadline=None)
@given(junk)
def test_field_parser_never_crashes(s):
    try:
        sel = parse_fields(s, PODS)
    except KubeError as e:
        assert e.code == 400 and e.reason == "BadRequest"
    else:
        sel.matches({"metadata": {"name": "x"}, "spec": {}, "status": {}})


req = st.one_of(
    st.tuples(label_key, st.sampled_from(["=", "==", "!="]), label_val),
    st.tuples(label_key, st.sampled_from(["in", "notin"]), st.lists(label_val, min_size=1, max_size=3)),
    st.tuples(label_key, st.sampled_from(["exists", "!"]), st.none()),
)


def _render(r) -> str:
    k, op, v = r
    if op in ("=", "==", "!="):
        return f"{k}{op}{v}"
    if op in ("in", "notin"):
        return f"{k} {op} ({','.join(v)})"
    return k if op == "exists" else f"!{k}"


def _ref(r, labels: dict) -> bool:
    k, op, v = r
    if op in ("=", "=="):
        return labels.get(k) == v
    if op == "!=":
        return labels.get(k) != v
    if op == "in":
        return k in labels and labels[k] in v
    if op == "notin":
        return labels.get(k) not in v
    return (k in labels) == (op == "exists")


@settings(max_examples=300, deadline=None)
@given(st.lists(req, min_size=1, max_size=4), st.dictionaries(label_key, label_val, max_size=4))
def test_label_selectors_match_like_the_reference(reqs, labels):
    sel = parse_labels(",".join(_render(r) for r in reqs))
    assert sel.matches({"metadata": {"labels": labels}}) == all(_ref(r, labels) for r in reqs)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["labelSelector", "fieldSelector", "resourceVersion", "limit", "continue",
                        "resourceVersionMatch", "timeoutSeconds"]), junk, st.booleans())
def test_malformed_query_options_are_a_status_never_a_crash(kube_front, option, value, watch):
    if watch and option == "timeoutSeconds":
        assume(not (value.strip() == "" or (value.isascii() and value.isdigit())))   # a valid one streams for long
    q = f"{option}={quote(value, safe='')}" + ("&watch=true&timeoutSeconds=1" if watch and option != "timeoutSeconds" else "")
    if watch and option == "timeoutSeconds":
        q += "&watch=true"
    code, body = get(kube_front.url, f"/api/v1/pods?{q}", timeout=20)
    if code == 200:
        return          # a value that is valid after all (empty, a number, a real selector)
    assert code in (400, 410, 422, 504), (q, code, body)
    assert isinstance(body, dict) and body["kind"] == "Status" and body["status"] == "Failure", (q, body)
    assert body["code"] == code
