"""PromQL label matchers: checked, and added to every vector selector of an expression.

A Prometheus that holds several clusters (ceph-mixin's `cluster` label) needs
each query narrowed to one; a matcher glued to the end of a query would narrow
only its last selector, so the expression is walked as Prometheus' lexer
would: strings, ranges, grouping label lists and function names are told
apart from the metric names and `{...}` selectors the matcher belongs to.
"""

from __future__ import annotations

import re

_NAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
_STRING = r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|`[^`]*`'
_MATCHER = re.compile(rf"\s*({_NAME})\s*(=~|!~|!=|=)\s*({_STRING})\s*")

# Words that are never metric names where they stand (promql/parser/lex.go's keys).
_KEYWORDS = frozenset({"and", "or", "unless", "atan2", "bool", "offset", "by", "without",
                       "on", "ignoring", "group_left", "group_right", "inf", "nan"})
_GROUPING = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_AGGREGATORS = frozenset({"sum", "avg", "count", "min", "max", "group", "stddev", "stdvar",
                          "topk", "bottomk", "count_values", "quantile", "limitk",
                          "limit_ratio"})
_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_NUMBER = re.compile(r"0[xX][0-9a-fA-F]+|[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?[a-zA-Z0-9]*")
_QUOTED = re.compile(_STRING)


class MatcherError(ValueError):
    """A label matcher that Prometheus would refuse; the text says why."""


def parse_matchers(text: str) -> str:
    """`cluster="prod"` or `cluster="prod", dc=~"eu.*"`, normalised; MatcherError if not."""
    text = text.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    out, pos = [], 0
    while True:
        m = _MATCHER.match(text, pos)
        if not m:
            raise MatcherError(f'takes label matchers like cluster="prod", and '
                               f"{text!r} is not one")
        out.append(f"{m.group(1)}{m.group(2)}{m.group(3)}")
        pos = m.end()
        if pos == len(text):
            return ",".join(out)
        if text[pos] != ",":
            raise MatcherError(f'takes label matchers like cluster="prod" separated by '
                               f"commas, and {text!r} is not that")
        pos += 1


def _skip_space(expr: str, i: int) -> int:
    while i < len(expr):
        if expr[i].isspace():
            i += 1
        elif expr[i] == "#":  # a comment runs to the end of the line
            while i < len(expr) and expr[i] != "\n":
                i += 1
        else:
            break
    return i


def _closing(expr: str, i: int, open_: str, close: str) -> int:
    """Index just past the bracket that closes expr[i], strings inside skipped."""
    depth = 0
    while i < len(expr):
        c = expr[i]
        if c in "\"'`":
            m = _QUOTED.match(expr, i)
            if not m:
                raise MatcherError(f"unterminated string in {expr!r}")
            i = m.end()
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise MatcherError(f"unbalanced {open_}{close} in {expr!r}")


def inject(expr: str, matchers: str) -> str:
    """`expr` with `matchers` added to each of its vector selectors."""
    if not matchers:
        return expr
    out: list[str] = []
    i = 0
    n = len(expr)
    while i < n:
        c = expr[i]
        if c in "\"'`":
            m = _QUOTED.match(expr, i)
            if not m:
                raise MatcherError(f"unterminated string in {expr!r}")
            out.append(m.group())
            i = m.end()
        elif c == "#":
            j = expr.find("\n", i)
            j = n if j < 0 else j
            out.append(expr[i:j])
            i = j
        elif c == "[":  # a range or subquery: durations only
            j = _closing(expr, i, "[", "]")
            out.append(expr[i:j])
            i = j
        elif c == "{":  # a selector without a metric name
            out.append(_braces(expr, i, matchers))
            i = _closing(expr, i, "{", "}")
        elif c.isdigit() or (c == "." and i + 1 < n and expr[i + 1].isdigit()):
            m = _NUMBER.match(expr, i)
            assert m is not None
            out.append(m.group())
            i = m.end()
        elif c.isalpha() or c in "_:":
            m = _IDENT.match(expr, i)
            assert m is not None
            word = m.group()
            out.append(word)
            i = m.end()
            nxt = _skip_space(expr, i)
            follows = expr[nxt] if nxt < n else ""
            if word.lower() in _GROUPING:
                if follows == "(":  # a label list, not an expression
                    j = _closing(expr, nxt, "(", ")")
                    out.append(expr[i:j])
                    i = j
            elif word.lower() in _KEYWORDS:
                pass
            elif follows == "(":
                pass  # a function or an aggregation
            elif word in _AGGREGATORS and _IDENT.match(expr, nxt) and \
                    _IDENT.match(expr, nxt).group().lower() in ("by", "without"):
                pass  # `sum by (x) (...)`
            elif follows == "{":
                out.append(expr[i:nxt])
                out.append(_braces(expr, nxt, matchers))
                i = _closing(expr, nxt, "{", "}")
            else:
                out.append("{" + matchers + "}")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _braces(expr: str, i: int, matchers: str) -> str:
    end = _closing(expr, i, "{", "}")
    inner = expr[i + 1:end - 1]
    if not inner.strip():
        return "{" + matchers + "}"
    return "{" + matchers + ", " + inner.lstrip() + "}"


def check_query(expr: str) -> str:
    """`expr`, stripped, if Prometheus' lexer would get through it: not empty, strings
    closed, (), {} and [] balanced; MatcherError saying what is wrong if not. The rest
    of PromQL is Prometheus' to judge: it refuses a bad query with its own sentence."""
    expr = expr.strip()
    if not expr:
        raise MatcherError("it is empty")
    inject(expr, 'x="y"')  # walks strings, {} and [] as the lexer does; raises if torn
    depth = 0
    i = 0
    while i < len(expr):
        c = expr[i]
        if c in "\"'`":
            m = _QUOTED.match(expr, i)
            assert m is not None  # inject() above found every string closed
            i = m.end()
            continue
        if c == "#":  # a comment runs to the end of the line
            j = expr.find("\n", i)
            i = len(expr) if j < 0 else j
            continue
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth < 0:
            break
        i += 1
    if depth:
        raise MatcherError(f"unbalanced () in {expr!r}")
    return expr
