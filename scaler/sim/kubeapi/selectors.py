"""Label selectors (the full Kubernetes grammar) and field selectors on the fields each kind
selects on (pods, events, and every other kind's name and namespace), as kube-apiserver."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal


class SelectorError(ValueError):
    """A label or field selector string does not parse."""


_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SPECIAL = set("!=(),<>")

Operator = Literal["exists", "!exists", "=", "!=", "in", "notin", "gt", "lt"]


@dataclass(frozen=True, slots=True)
class Requirement:
    """One requirement of a label selector: ``key``, an operator and its values."""

    key: str
    op: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a label set satisfies this requirement (``!=``/``notin`` match absence)."""
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        if self.op in ("!=", "notin"):
            return not present or labels[self.key] not in self.values
        if not present:
            return False
        try:
            have = int(labels[self.key])
        except ValueError:
            return False
        bound = int(self.values[0])
        return have > bound if self.op == "gt" else have < bound


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed label selector; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether all requirements hold for ``labels``."""
        return all(r.matches(labels) for r in self.requirements)


def _lex(text: str) -> list[str]:
    tokens: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
        elif c in _SPECIAL:
            two = text[i : i + 2]
            if two in ("==", "!="):
                tokens.append(two)
                i += 2
            else:
                tokens.append(c)
                i += 1
        else:
            j = i
            while j < len(text) and not text[j].isspace() and text[j] not in _SPECIAL:
                j += 1
            tokens.append(text[i:j])
            i = j
    return tokens


def _check_key(key: str) -> str:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix)):
        raise SelectorError(f"invalid label key {key!r}: prefix must be a DNS subdomain")
    if len(name) > 63 or not _QUALIFIED_NAME.match(name):
        raise SelectorError(
            f"invalid label key {key!r}: name part must be 63 characters or less, consist of "
            "alphanumerics, '-', '_' or '.', and start and end with an alphanumeric"
        )
    return key


def _check_value(value: str) -> str:
    if value and (len(value) > 63 or not _QUALIFIED_NAME.match(value)):
        raise SelectorError(
            f"invalid label value {value!r}: must be 63 characters or less, consist of "
            "alphanumerics, '-', '_' or '.', and start and end with an alphanumeric"
        )
    return value


def _is_ident(tok: str | None) -> bool:
    return tok is not None and tok not in _SPECIAL and tok not in ("==", "!=")


def parse_label_selector(text: str) -> LabelSelector:
    """Parse the Kubernetes label selector grammar.

    Accepts comma-separated requirements: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``,
    ``a notin (x)``, ``a`` (exists), ``!a`` (does not exist), ``a>1``, ``a<1``.

    Raises:
        SelectorError: the text does not parse, or a key/value is not a valid label.
    """
    toks = _lex(text)
    if not toks:
        return LabelSelector()
    pos = 0
    reqs: list[Requirement] = []

    def peek() -> str | None:
        return toks[pos] if pos < len(toks) else None

    def take(what: str) -> str:
        nonlocal pos
        tok = peek()
        if tok is None:
            raise SelectorError(f"unable to parse requirement: found end of input, expected {what}")
        pos += 1
        return tok

    while True:
        tok = take("identifier or '!'")
        if tok == "!":
            key = take("identifier")
            if not _is_ident(key):
                raise SelectorError(
                    f"unable to parse requirement: found {key!r}, expected identifier"
                )
            reqs.append(Requirement(_check_key(key), "!exists"))
        elif _is_ident(tok):
            key = _check_key(tok)
            nxt = peek()
            if nxt is None or nxt == ",":
                reqs.append(Requirement(key, "exists"))
            elif nxt in ("=", "==", "!=", ">", "<"):
                pos += 1
                value = peek()
                if value is not None and _is_ident(value):
                    pos += 1
                else:
                    value = ""  # 'a=' selects the empty value, as upstream
                if nxt in (">", "<"):
                    if not re.fullmatch(r"-?[0-9]+", value):
                        raise SelectorError(
                            f"unable to parse requirement: for 'Gt', 'Lt' operators, the value "
                            f"must be an integer, got {value!r}"
                        )
                    op: Operator = "gt" if nxt == ">" else "lt"
                else:
                    _check_value(value)
                    op = "!=" if nxt == "!=" else "="
                reqs.append(Requirement(key, op, (value,)))
            elif nxt in ("in", "notin"):
                pos += 1
                if take("'('") != "(":
                    raise SelectorError(
                        f"unable to parse requirement: found {toks[pos - 1]!r}, expected '('"
                    )
                values: list[str] = []
                expect_value = True
                while True:
                    t = take("')'")
                    if t == ")":
                        if values and expect_value:
                            values.append("")  # trailing comma selects "" as upstream
                        break
                    if t == ",":
                        if expect_value:
                            values.append("")
                        expect_value = True
                        continue
                    if not expect_value or not _is_ident(t):
                        raise SelectorError(
                            f"unable to parse requirement: found {t!r}, expected ',' or ')'"
                        )
                    values.append(_check_value(t))
                    expect_value = False
                if not values:
                    raise SelectorError(
                        "unable to parse requirement: for 'in', 'notin' operators, values set "
                        "can't be empty"
                    )
                reqs.append(Requirement(key, "in" if nxt == "in" else "notin", tuple(values)))
            else:
                raise SelectorError(
                    f"unable to parse requirement: found {nxt!r}, expected one of "
                    "'=', '==', '!=', 'in', 'notin', ',', '>', '<'"
                )
        else:
            raise SelectorError(f"unable to parse requirement: found {tok!r}, expected identifier")
        sep = peek()
        if sep is None:
            return LabelSelector(tuple(reqs))
        if sep != ",":
            raise SelectorError(f"found {sep!r}, expected: ',' or end of string")
        pos += 1


def format_selector(match_labels: Mapping[str, str]) -> str:
    """``matchLabels`` as the API formats a selector: ``k=v`` sorted by key, comma-joined."""
    return ",".join(f"{k}={match_labels[k]}" for k in sorted(match_labels))


def _get(obj: Mapping[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, Mapping) else None
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


@dataclass(frozen=True, slots=True)
class SelectableFields:
    """The fields a kind's list selects on (kube-apiserver's ``ToSelectableFields`` and
    field label conversions of the kind): ``labels`` the allowed names, ``values`` an
    object's value of each (an absent field is ``""``, a bool ``true``/``false``)."""

    labels: frozenset[str]
    values: Callable[[Mapping[str, Any]], Mapping[str, str]]


def _meta(obj: Mapping[str, Any]) -> dict[str, str]:
    return {"metadata.name": _get(obj, "metadata.name"),
            "metadata.namespace": _get(obj, "metadata.namespace")}  # fmt: skip


def _pod_values(pod: Mapping[str, Any]) -> dict[str, str]:
    ips = (pod.get("status") or {}).get("podIPs") or []
    return {
        **_meta(pod),
        **{f: _get(pod, f) for f in ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                                     "spec.serviceAccountName", "status.phase",
                                     "status.nominatedNodeName")},
        "spec.hostNetwork": _get(pod, "spec.hostNetwork") or "false",
        "status.podIP": str(ips[0].get("ip", "")) if ips else _get(pod, "status.podIP"),
        "status.podIPs": str(ips[0].get("ip", "")) if ips else _get(pod, "status.podIP"),
    }  # fmt: skip


def _event_values(event: Mapping[str, Any]) -> dict[str, str]:
    involved = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
    return {
        **_meta(event),
        **{f"involvedObject.{f}": _get(event, f"involvedObject.{f}") for f in involved},
        **{f: _get(event, f) for f in ("reason", "reportingComponent", "type")},
        "source": _get(event, "source.component") or _get(event, "reportingComponent"),
    }


def _selectable(values: Callable[[Mapping[str, Any]], Mapping[str, str]]) -> SelectableFields:
    return SelectableFields(frozenset(values({})), values)


#: Pods (kubernetes pkg/registry/core/pod ``ToSelectableFields``).
POD_FIELDS = _selectable(_pod_values)
#: Events (pkg/registry/core/event ``ToSelectableFields``).
EVENT_FIELDS = _selectable(_event_values)
#: Every other kind: its name and namespace.
META_FIELDS = _selectable(_meta)


def field_filter(
    text: str, fields: SelectableFields = META_FIELDS
) -> Callable[[Mapping[str, Any]], bool]:
    """Parse a field selector (``a.b=x,c!=y``, ``==`` too) on the fields a kind selects on.

    Raises:
        SelectorError: it does not parse, or names a field the kind does not select on
            (``field label not supported: <field>``, as the API answers).
    """
    terms: list[tuple[str, bool, str]] = []
    for raw in filter(None, (t.strip() for t in text.split(","))):
        m = re.fullmatch(r"([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*)", raw)
        if m is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{raw}'")
        if m.group(1) not in fields.labels:
            raise SelectorError(f"field label not supported: {m.group(1)}")
        terms.append((m.group(1), m.group(2) != "!=", m.group(3).strip()))
    return lambda obj: all((fields.values(obj)[p] == v) == eq for p, eq, v in terms)
