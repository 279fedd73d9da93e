"""What Argo Rollouts does with a web metric, step for step, for the gate tests.

From argo-rollouts' metricproviders/webmetric/webmetric.go and utils/evaluate:

1. the metric's fields are templated: ``{{args.NAME}}`` becomes the argument's value
   (the AnalysisRun's args: the Rollout's, merged over the template's defaults;
   ``valueFrom.podTemplateHashValue: Latest|Stable`` is a ReplicaSet's hash);
2. an HTTP GET of the URL, with ``timeoutSeconds`` (10 when unset); a non-2xx answer
   or an unreadable one is a measurement ``Error``;
3. the body is parsed as JSON and the Kubernetes JSONPath ``jsonPath`` (``{$}`` when
   unset) picks the value;
4. ``successCondition`` and ``failureCondition`` are expr-language expressions over
   ``result``: ``Failed`` when the failure condition holds, ``Successful`` when the
   success condition holds, ``Inconclusive`` when neither does (with only one of
   them given, the other is its negation).

The expression evaluator covers the part of expr the templates use: ``==``, ``!=``,
``&&``/``and``, ``||``/``or``, ``!``/``not``, parentheses, string literals, ``true``,
``false``, ``nil`` and the variable ``result``; anything else raises, so a template
using more fails the test instead of being judged by a guess.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

_ARG = re.compile(r"\{\{\s*args\.([A-Za-z0-9_.-]+)\s*\}\}")


class ExprError(ValueError):
    """The expression uses something this evaluator (and so the test) does not know."""


def resolve_args(
    template: Mapping[str, Any], rollout_args: list[Mapping[str, Any]], hashes: Mapping[str, str]
) -> dict[str, str]:
    """The AnalysisRun's argument values, as Argo resolves them (an arg without a value
    is an error: the AnalysisRun would not start)."""
    values: dict[str, str | None] = {
        a["name"]: a.get("value") for a in template["spec"].get("args") or []
    }
    for arg in rollout_args:
        name = arg["name"]
        if name not in values:
            raise KeyError(f"the Rollout passes {name!r}, which the template does not declare")
        if "value" in arg:
            values[name] = str(arg["value"])
        else:
            which = arg["valueFrom"]["podTemplateHashValue"]
            values[name] = hashes[which]
    missing = [n for n, v in values.items() if v is None]
    if missing:
        raise KeyError(f"args without a value: {missing}")
    return {k: str(v) for k, v in values.items()}


def render(text: str, args: Mapping[str, str]) -> str:
    """``{{args.NAME}}`` substituted; an unknown argument is an error, as in Argo."""

    def one(m: re.Match[str]) -> str:
        if m.group(1) not in args:
            raise KeyError(f"unresolved {m.group(0)}")
        return args[m.group(1)]

    return _ARG.sub(one, text)


def jsonpath(expr: str, doc: Any) -> Any:
    """Kubernetes JSONPath for field paths: ``{$.a.b}``, ``{.a.b}``, ``{$}``."""
    m = re.fullmatch(r"\{\s*(\$?)((?:\.[A-Za-z_][A-Za-z0-9_-]*)*)\s*\}", expr)
    if m is None:
        raise ExprError(f"JSONPath {expr!r} is beyond this emulation")
    value = doc
    for part in [p for p in m.group(2).split(".") if p]:
        if not isinstance(value, dict) or part not in value:
            raise KeyError(f"JSONPath {expr!r}: {part} not found")
        value = value[part]
    return value


_TOKENS = re.compile(
    r"""\s*(?:(?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(?P<op>==|!=|&&|\|\||!|\(|\))"""
    r"""|(?P<word>[A-Za-z_][A-Za-z0-9_]*))"""
)


def _lex(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKENS.match(text, pos)
        if m is None or m.end() == pos:
            raise ExprError(f"cannot read {text[pos:]!r}")
        pos = m.end()
        if m.group("str") is not None:
            out.append(("value", json.loads('"' + m.group("str")[1:-1] + '"')))
        elif m.group("op") is not None:
            out.append(("op", m.group("op")))
        else:
            word = m.group("word")
            if word in ("and", "or", "not"):
                out.append(("op", {"and": "&&", "or": "||", "not": "!"}[word]))
            elif word in ("true", "false", "nil"):
                out.append(("value", {"true": True, "false": False, "nil": None}[word]))
            else:
                out.append(("name", word))
    return out


def evaluate(expression: str, result: Any) -> bool:
    """The expression's value with ``result`` bound; it must be a boolean (Argo's
    EvalCondition refuses anything else)."""
    tokens = _lex(expression)
    pos = 0

    def peek() -> tuple[str, Any] | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> tuple[str, Any]:
        nonlocal pos
        if pos >= len(tokens):
            raise ExprError(f"unexpected end of {expression!r}")
        pos += 1
        return tokens[pos - 1]

    def primary() -> Any:
        kind, value = take()
        if kind == "op" and value == "(":
            inner = disjunction()
            if take() != ("op", ")"):
                raise ExprError(f"missing ')' in {expression!r}")
            return inner
        if kind == "op" and value == "!":
            operand = primary()
            if not isinstance(operand, bool):
                raise ExprError("! needs a boolean")
            return not operand
        if kind == "value":
            return value
        if kind == "name":
            if value != "result":
                raise ExprError(f"unknown name {value!r}")
            return result
        raise ExprError(f"unexpected {value!r} in {expression!r}")

    def comparison() -> Any:
        left = primary()
        while peek() in (("op", "=="), ("op", "!=")):
            op = take()[1]
            right = primary()
            left = (left == right) if op == "==" else (left != right)
        return left

    def conjunction() -> Any:
        left = comparison()
        while peek() == ("op", "&&"):
            take()
            right = comparison()
            if not isinstance(left, bool) or not isinstance(right, bool):
                raise ExprError("&& needs booleans")
            left = left and right
        return left

    def disjunction() -> Any:
        left = conjunction()
        while peek() == ("op", "||"):
            take()
            right = conjunction()
            if not isinstance(left, bool) or not isinstance(right, bool):
                raise ExprError("|| needs booleans")
            left = left or right
        return left

    value = disjunction()
    if pos != len(tokens):
        raise ExprError(f"trailing tokens in {expression!r}")
    if not isinstance(value, bool):
        raise ExprError(f"{expression!r} is not a boolean")
    return value


def outcome(metric: Mapping[str, Any], result: Any) -> str:
    """Argo's EvaluateResult: Successful, Failed or Inconclusive."""
    success_expr = metric.get("successCondition") or ""
    failure_expr = metric.get("failureCondition") or ""
    success = evaluate(success_expr, result) if success_expr else False
    failure = evaluate(failure_expr, result) if failure_expr else False
    if not success_expr and not failure_expr:
        return "Successful"
    if success_expr and not failure_expr:
        failure = not success
    elif failure_expr and not success_expr:
        success = not failure
    if failure:
        return "Failed"
    if not success:
        return "Inconclusive"
    return "Successful"


def measure(metric: Mapping[str, Any], args: Mapping[str, str]) -> tuple[str, Any]:
    """One measurement of a web metric: (phase, value); phase "Error" with the reason."""
    web = metric["provider"]["web"]
    url = render(web["url"], args)
    method = web.get("method", "GET")
    timeout = web.get("timeoutSeconds") or 10
    req = urllib.request.Request(url, method=method)
    for header in web.get("headers") or []:
        req.add_header(header["key"], render(header["value"], args))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - loopback
            status, body = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return "Error", f"received non 2xx response code: {exc.code}: {exc.read()!r}"
    except OSError as exc:
        return "Error", str(exc)
    if not 200 <= status < 300:
        return "Error", f"received non 2xx response code: {status}"
    try:
        data = json.loads(body)
    except ValueError:
        return outcome(metric, body.decode()), body.decode()
    value = jsonpath(web.get("jsonPath") or "{$}", data)
    return outcome(metric, value), value
