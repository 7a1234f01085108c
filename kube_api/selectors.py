"""Label and field selectors, parsed as the apiserver parses them, matched against stored objects.

* ``parse_labels("a=b,c!=d,e in (x,y),f notin (z),g,!h,n>5")`` -> :class:`LabelSelector`
  (``labels.Parse``: ``=``, ``==``, ``!=``, ``in``, ``notin``, exists, ``!`` does-not-exist,
  ``>``/``<``), keys and values checked like Kubernetes' (qualified names, 63-character values);
* ``parse_fields("spec.nodeName=n1,status.phase!=Failed", resource)`` -> :class:`FieldSelector`
  (``fields.ParseSelector``: ``=``, ``==``, ``!=``, ``\\``-escapes); only the fields the resource's
  field-label conversion supports (Pod: metadata.name/namespace, spec.nodeName, spec.schedulerName,
  status.phase, ...), anything else 400 naming the field, as kube-apiserver does.

Malformed selectors raise a 400 ``KubeError`` (BadRequest) naming the selector and what is wrong.
Both match the *stored* shape (docs/object-shapes.md); an absent field matches as "".
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from kube_api.resources import Resource
from kube_api.status import KubeError

__all__ = ["LabelSelector", "FieldSelector", "parse_labels", "parse_fields", "Selector", "FIELD_LABELS"]

_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS1123_SUB = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _bad(selector: str, what: str, message: str) -> KubeError:
    field = "labelSelector" if what == "label" else "fieldSelector"
    msg = f"unable to parse requirement: {message}" if what == "label" else message
    return KubeError(400, "BadRequest", f"{field} {selector!r:.200}: {msg}",
                     details={"causes": [{"reason": "FieldValueInvalid", "field": field, "message": msg}]})


def _check_key(sel: str, key: str) -> None:
    if not key:
        raise _bad(sel, "label", "key: Invalid value: \"\": name part must be non-empty")
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix or len(prefix) > 253 or not _DNS1123_SUB.fullmatch(prefix):
            raise _bad(sel, "label", f"key: Invalid value: {key!r}: prefix part must be a lowercase DNS-1123 "
                       "subdomain")
    if not name or len(name) > 63 or not _NAME.fullmatch(name):
        raise _bad(sel, "label", f"key: Invalid value: {key!r}: name part must consist of alphanumeric "
                   "characters, '-', '_' or '.', start and end with an alphanumeric character, at most 63 "
                   "characters")


def _check_value(sel: str, value: str) -> None:
    if value and (len(value) > 63 or not _NAME.fullmatch(value)):
        raise _bad(sel, "label", f"values[0]: Invalid value: {value!r}: a valid label must be an empty string "
                   "or consist of alphanumeric characters, '-', '_' or '.', start and end with an alphanumeric "
                   "character, at most 63 characters")


@dataclass(frozen=True)
class _Req:
    key: str
    op: str                    # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict) -> bool:
        op = self.op
        has = self.key in labels
        if op == "exists":
            return has
        if op == "!":
            return not has
        v = labels.get(self.key)
        if op in ("=", "in"):
            return has and v in self.values
        if op in ("!=", "notin"):
            return not has or v not in self.values
        if not has:
            return False
        try:
            n = int(v)
        except (TypeError, ValueError):
            return False
        return n > int(self.values[0]) if op == "gt" else n < int(self.values[0])


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[_Req, ...]

    def empty(self) -> bool:
        return not self.requirements

    def matches(self, obj: dict) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(r.matches(labels) for r in self.requirements)


_PUNCT = frozenset(("=", "==", "!=", "(", ")", "!", ">", "<"))
_TOKEN = re.compile(r"\s*(!=|==|=|!|\(|\)|,|>|<|[^\s!=(),<>]+)")


def parse_labels(selector: str | None) -> LabelSelector:
    """A label selector (``labels.Parse``). Empty -> matches everything."""
    if selector is None or not selector.strip():
        return LabelSelector(())
    sel = selector
    toks: list[str] = []
    pos = 0
    while pos < len(sel):
        m = _TOKEN.match(sel, pos)
        if m is None:
            if sel[pos:].strip() == "":
                break
            raise _bad(sel, "label", f"unexpected character at position {pos}")
        toks.append(m.group(1))
        pos = m.end()
        while pos < len(sel) and sel[pos].isspace():
            pos += 1
    reqs: list[_Req] = []
    i = 0
    n = len(toks)

    def need(j: int, what: str) -> str:
        if j >= n:
            raise _bad(sel, "label", f"found end of input, expected {what}")
        return toks[j]

    while i < n:
        t = toks[i]
        if t == "!":
            key = need(i + 1, "a key after '!'")
            _check_key(sel, key)
            reqs.append(_Req(key, "!"))
            i += 2
        elif t in ("=", "==", "!=", "(", ")", ",", ">", "<"):
            raise _bad(sel, "label", f"found '{t}', expected: !, identifier, or 'end of string'")
        else:
            key = t
            _check_key(sel, key)
            op = toks[i + 1] if i + 1 < n else ","
            if op == ",":
                reqs.append(_Req(key, "exists"))
                i += 1
            elif op in ("=", "==", "!="):
                nxt = toks[i + 2] if i + 2 < n else None
                if nxt is None or nxt == ",":
                    val, i = "", i + 2
                elif nxt in _PUNCT:
                    raise _bad(sel, "label", f"found '{nxt}', expected: identifier")
                else:
                    val, i = nxt, i + 3
                _check_value(sel, val)
                reqs.append(_Req(key, "!=" if op == "!=" else "=", (val,)))
            elif op in ("in", "notin"):
                if need(i + 2, "'('") != "(":
                    raise _bad(sel, "label", f"found '{toks[i + 2]}', expected: '('")
                j = i + 3
                vals: list[str] = []
                expect_value = True
                while True:
                    tj = need(j, "')'")
                    if tj == ")":
                        if expect_value and vals:
                            vals.append("")
                        break
                    if tj == ",":
                        if expect_value:
                            vals.append("")
                        expect_value = True
                    elif tj in ("=", "==", "!=", "(", "!", ">", "<"):
                        raise _bad(sel, "label", f"found '{tj}', expected: ',', ')' or identifier")
                    else:
                        if not expect_value:
                            raise _bad(sel, "label", f"found '{tj}', expected: ',' or ')'")
                        vals.append(tj)
                        expect_value = False
                    j += 1
                if not vals:
                    vals = [""]
                for v in vals:
                    _check_value(sel, v)
                reqs.append(_Req(key, op, tuple(vals)))
                i = j + 1
            elif op in (">", "<"):
                v = need(i + 2, "an integer")
                try:
                    int(v)
                except ValueError:
                    raise _bad(sel, "label", f"for 'Gt', 'Lt' operators, the value must be an integer, "
                               f"got {v!r}") from None
                reqs.append(_Req(key, "gt" if op == ">" else "lt", (v,)))
                i += 3
            else:
                raise _bad(sel, "label", f"found '{op}', expected: in, notin, =, ==, !=, gt, lt")
        if i < n:
            if toks[i] != ",":
                raise _bad(sel, "label", f"found '{toks[i]}', expected: ',' or 'end of string'")
            i += 1
            if i >= n:
                raise _bad(sel, "label", "found end of input after ',', expected: !, identifier")
    return LabelSelector(tuple(reqs))


# --- field selectors ---------------------------------------------------------------------------

_COMMON = ("metadata.name", "metadata.namespace")
# the field labels each kind's conversion func accepts (pkg/apis/core/v1/conversion.go and kin)
FIELD_LABELS: dict[str, tuple[str, ...]] = {
    "Pod": _COMMON + ("spec.nodeName", "spec.schedulerName", "status.phase", "status.nominatedNodeName",
                      "spec.restartPolicy", "spec.serviceAccountName", "spec.hostNetwork", "status.podIP",
                      "status.podIPs"),
    "Node": _COMMON + ("spec.unschedulable",),
    "Event": _COMMON + ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                        "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                        "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"),
    "Namespace": _COMMON + ("status.phase",),
}


@dataclass(frozen=True)
class _FReq:
    field: str
    path: tuple[str, ...]
    value: str
    negate: bool


def _field_value(obj: dict, path: tuple[str, ...]) -> str:
    if path == ("source",):   # events: source.component
        cur = (obj.get("source") or {}).get("component")
    else:
        cur = obj
        for p in path:
            if not isinstance(cur, dict):
                cur = None
                break
            cur = cur.get(p)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if isinstance(cur, list):   # status.podIPs: the first
        cur = cur[0].get("ip", "") if cur and isinstance(cur[0], dict) else ""
    return str(cur)


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[_FReq, ...]

    def empty(self) -> bool:
        return not self.requirements

    def matches(self, obj: dict) -> bool:
        for r in self.requirements:
            v = _field_value(obj, r.path)
            if (v == r.value) == r.negate:
                return False
        return True


def _split_unescaped(s: str, sep: str) -> list[str]:
    out, cur, i = [], [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            cur.append(s[i:i + 2])
            i += 2
            continue
        if c == sep:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur))
    return out


def _unescape(sel: str, v: str) -> str:
    out, i = [], 0
    while i < len(v):
        c = v[i]
        if c == "\\":
            if i + 1 >= len(v) or v[i + 1] not in "\\,=!":
                raise _bad(sel, "field", f"invalid escape sequence in {v!r}")
            out.append(v[i + 1])
            i += 2
            continue
        if c in ",=":
            raise _bad(sel, "field", f"invalid selector: unescaped {c!r} in value {v!r}")
        out.append(c)
        i += 1
    return "".join(out)


def parse_fields(selector: str | None, resource: Resource) -> FieldSelector:
    """A field selector (``fields.ParseSelector``) for ``resource``; 400 for an unsupported field."""
    if selector is None or not selector.strip():
        return FieldSelector(())
    sel = selector
    allowed = FIELD_LABELS.get(resource.kind, _COMMON)
    reqs = []
    for part in _split_unescaped(sel, ","):
        part = part.strip()
        if not part:
            raise _bad(sel, "field", "invalid selector: empty requirement")
        m = re.match(r"^([^=!\\]+?)\s*(!=|==|=)(.*)$", part, re.S)
        if m is None:
            raise _bad(sel, "field", f"invalid selector: '{part}'; can't understand '{part}'")
        field, op, raw = m.group(1).strip(), m.group(2), m.group(3)
        value = _unescape(sel, raw)
        if field not in allowed:
            raise KubeError(400, "BadRequest",
                            f'field label not supported: {field} (fieldSelector {sel!r:.200}; {resource.plural} '
                            f'support: {", ".join(allowed)})',
                            details={"causes": [{"reason": "FieldValueNotSupported", "field": "fieldSelector",
                                                 "message": f"field label not supported: {field}"}]})
        reqs.append(_FReq(field, tuple(field.split(".")), value, op == "!="))
    return FieldSelector(tuple(reqs))


@dataclass(frozen=True)
class Selector:
    """Both selectors of one request."""
    labels: LabelSelector
    fields: FieldSelector

    @classmethod
    def parse(cls, label_selector: str | None, field_selector: str | None, resource: Resource) -> "Selector":
        return cls(parse_labels(label_selector), parse_fields(field_selector, resource))

    def empty(self) -> bool:
        return self.labels.empty() and self.fields.empty()

    def matches(self, obj: dict) -> bool:
        return self.labels.matches(obj) and self.fields.matches(obj)
