"""A rule's Spark SQL expressions as PromQL over the series `/metrics` serves.

A condition becomes a filter: the entities (series with the entity's key labels) where it holds.
SQL's NULL is a missing series (the exposition leaves a null value out), so a comparison with a
missing value matches nothing in both languages. NOT is pushed down to the comparisons (NOT a > b
is a <= b, which is false for a null in both); what only holds where a value is missing (`x IS
NULL`, `NOT coalesce(b, false)`) is kept apart and taken away with `unless`, which needs another
part of the same AND that says which entities to look at. Anything else raises `Inexpressible`
with the reason, never a guess.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import cast

import sqlglot
from sqlglot import exp

from monitor.core.derived import columns_of
from monitor.expose.metrics.rules_export.served import ServedColumn, key_label, served_columns


class Inexpressible(Exception):
    """The expression has no PromQL form over `/metrics`; the message says why."""


@dataclass(frozen=True, slots=True)
class Filter:
    """`positive unless negatives[0] unless ...`: where a condition holds. `positive` None means
    "every entity but the negatives", which PromQL cannot list on its own."""

    positive: str | None
    negatives: tuple[str, ...] = ()
    keyed: tuple[str, ...] = ()
    """Conditions on key labels, as `and on(topic) <one series with that label>` (or `unless`)."""

    def promql(self) -> str:
        if self.positive is None:
            raise Inexpressible(
                "it holds where values are missing or names only key labels, and no other part "
                "of the condition says which series to look at"
            )
        if not self.negatives and not self.keyed:
            return self.positive
        negatives = "".join(f" unless {_group(n)}" for n in self.negatives)
        return _group(self.positive) + negatives + "".join(f" {k}" for k in self.keyed)


@dataclass(frozen=True, slots=True)
class Value:
    promql: str
    scalar: bool


_FLIP: dict[type[exp.Expression], str] = {
    exp.GT: "<=",
    exp.GTE: "<",
    exp.LT: ">=",
    exp.LTE: ">",
    exp.EQ: "!=",
    exp.NEQ: "==",
}
_OPS: dict[type[exp.Expression], str] = {
    exp.GT: ">",
    exp.GTE: ">=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.EQ: "==",
    exp.NEQ: "!=",
}
_ARITHMETIC: dict[type[exp.Expression], str] = {
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Mod: "%",
}
_FUNCTIONS: dict[type[exp.Expression], str] = {exp.Abs: "abs", exp.Floor: "floor", exp.Ceil: "ceil"}
_REGEX_SPECIAL = set("\\.+*?()|[]{}^$")
_SIMPLE = re.compile(
    r'[a-z_:][a-z0-9_:]*|[0-9][0-9.eE+-]*|max by \([a-z_, ]+\) \([a-z_:]+(\{[a-z_]+[=!~]+"[^"{}]*"\})?\)'
)


class Translator:
    """Translates the expressions of rules on one entity."""

    def __init__(self, entity: str) -> None:
        self.entity = entity
        self.served = served_columns(entity)
        self.types = {name: column.type for name, column in columns_of(entity).items()}
        if not self.served:
            raise Inexpressible(f"/metrics serves no series of entity {entity}")

    # -- conditions ---------------------------------------------------------------------------

    def condition(self, texts: list[str], negated: tuple[str, ...] = ()) -> Filter:
        """Where every text holds and none of `negated` does."""
        parts: list[exp.Expression] = [parse(t) for t in texts]
        parts += [exp.Not(this=exp.Paren(this=parse(t))) for t in negated]
        combined = parts[0]
        for part in parts[1:]:
            combined = exp.And(this=combined, expression=part)
        return self._filter(combined, negate=False)

    def _filter(self, node: exp.Expression, *, negate: bool) -> Filter:
        if isinstance(node, exp.Paren):
            return self._filter(node.this, negate=negate)
        if isinstance(node, exp.Not):
            return self._filter(node.this, negate=not negate)
        if isinstance(node, exp.And | exp.Or):
            conjunction = isinstance(node, exp.And) != negate
            left = self._filter(node.this, negate=negate)
            right = self._filter(node.expression, negate=negate)
            return (
                _and(left, right)
                if conjunction
                else Filter(f"{_group(left.promql())} or {_group(right.promql())}")
            )
        if isinstance(node, exp.Column):
            return self._boolean_column(node.name, truth=not negate)
        if isinstance(node, exp.Coalesce):
            return self._coalesce(node, negate=negate)
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            read = self._vector(node.this)
            return Filter(read) if negate else Filter(None, (read,))
        if isinstance(node, exp.In):
            return self._in(node, negate=negate)
        if isinstance(node, exp.Between):
            low = exp.GTE(this=node.this, expression=node.args["low"])
            high = exp.LTE(this=node.this, expression=node.args["high"])
            return self._filter(exp.And(this=low, expression=high), negate=negate)
        if type(node) in _OPS:
            return self._comparison(node, negate=negate)
        raise Inexpressible(f"{_sql(node)!r} has no PromQL form here")

    def _boolean_column(self, name: str, *, truth: bool) -> Filter:
        served = self._served(name)
        if self.types.get(name) != "boolean":
            raise Inexpressible(f"{name!r} is not true/false")
        return Filter(f"{served.read()} == {1 if truth else 0}")

    def _coalesce(self, node: exp.Coalesce, *, negate: bool) -> Filter:
        fallback = node.expressions[0] if len(node.expressions) == 1 else None
        if not isinstance(node.this, exp.Column) or not isinstance(fallback, exp.Boolean):
            raise Inexpressible(f"{_sql(node)!r}: only coalesce(column, true|false) has a PromQL form")
        holds_when_missing = bool(fallback.this) != negate
        present = self._boolean_column(node.this.name, truth=not negate)
        if not holds_when_missing:
            return present
        opposite = self._boolean_column(node.this.name, truth=negate)
        return Filter(None, (opposite.positive or "",))

    def _in(self, node: exp.In, *, negate: bool) -> Filter:
        column = node.this
        if not isinstance(column, exp.Column) or node.args.get("query") is not None:
            raise Inexpressible(f"{_sql(node)!r}: only `column IN (values)` has a PromQL form")
        keyed = self._key_filter(column, node.expressions, keep=not negate)
        if keyed is not None:
            return keyed
        if self.types.get(column.name) == "string":
            texts = [_text(v) for v in node.expressions]
            regex = "|".join("".join("\\" + c if c in _REGEX_SPECIAL else c for c in t) for t in texts)
            served = self._served(column.name)
            operator = "!~" if negate else "=~"
            return Filter(served.read(f"{{{served.text_label}{operator}{json.dumps(regex)}}}"))
        equals = [exp.EQ(this=column, expression=v) for v in node.expressions]
        either: exp.Expression = equals[0]
        for more in equals[1:]:
            either = exp.Or(this=either, expression=more)
        return self._filter(either, negate=negate)

    def _comparison(self, node: exp.Expression, *, negate: bool) -> Filter:
        operator = _FLIP[type(node)] if negate else _OPS[type(node)]
        text = self._text_comparison(node, operator)
        if text is not None:
            return text
        left, right = self.value(node.this), self.value(node.expression)
        if left.scalar and right.scalar:
            raise Inexpressible(f"{_sql(node)!r} compares two constants")
        return Filter(f"{_group(left.promql)} {operator} {_group(right.promql)}")

    def _key_filter(
        self, column: exp.Expression, values: list[exp.Expression], *, keep: bool
    ) -> Filter | None:
        """`topic = 'orders'` (or IN, <>, NOT IN) on a key column: kept (or taken away) with
        `and on(topic)` a series carrying each value as that label; None for another column."""
        label = key_label(self.entity, column.name) if isinstance(column, exp.Column) else None
        if label is None:
            return None
        texts = []
        for value in values:
            if not isinstance(value, exp.Literal):
                raise Inexpressible(f"{_sql(column)!r} has a PromQL form only compared with a constant")
            texts.append(str(value.this))
        series = " or ".join(
            f'label_replace(vector(1), "{label}", {json.dumps(text)}, "", "")' for text in texts
        )
        return Filter(None, keyed=(f"{'and' if keep else 'unless'} on({label}) ({series})",))

    def _text_comparison(self, node: exp.Expression, operator: str) -> Filter | None:
        """`status = 'ERR'` as a label matcher, or None when neither side is a text column."""
        sides = (node.this, node.expression)
        for column, other in (sides, sides[::-1]):
            if operator in ("==", "!=") and (
                keyed := self._key_filter(column, [other], keep=operator == "==")
            ):
                return keyed
            if isinstance(column, exp.Column) and self.types.get(column.name) == "string":
                if operator not in ("==", "!=") or not isinstance(other, exp.Literal):
                    raise Inexpressible(
                        f"{_sql(node)!r}: a text column has a PromQL form only as = or <> a text"
                    )
                served = self._served(column.name)
                matcher = "=" if operator == "==" else "!="
                return Filter(served.read(f"{{{served.text_label}{matcher}{json.dumps(_text(other))}}}"))
        return None

    # -- values -------------------------------------------------------------------------------

    def value(self, node: exp.Expression) -> Value:
        if isinstance(node, exp.Paren):
            inner = self.value(node.this)
            return Value(f"({inner.promql})", inner.scalar)
        if isinstance(node, exp.Column):
            return Value(self._vector(node), scalar=False)
        if isinstance(node, exp.Literal) and not node.is_string:
            return Value(str(node.this), scalar=True)
        if isinstance(node, exp.Boolean):
            return Value("1" if node.this else "0", scalar=True)
        if isinstance(node, exp.Neg):
            inner = self.value(node.this)
            return Value(f"-({inner.promql})", inner.scalar)
        if type(node) in _ARITHMETIC:
            left, right = self.value(node.this), self.value(node.expression)
            promql = f"{_group(left.promql)} {_ARITHMETIC[type(node)]} {_group(right.promql)}"
            return Value(promql, left.scalar and right.scalar)
        if isinstance(node, exp.SafeDivide):  # null, not a failure, on a zero divisor: leave those out
            left, right = self.value(node.this), self.value(node.expression)
            divisor = right.promql if right.scalar else f"({right.promql} != 0)"
            if right.scalar and float(right.promql) == 0:
                raise Inexpressible(f"{_sql(node)!r} divides by zero")
            return Value(f"{_group(left.promql)} / {divisor}", left.scalar and right.scalar)
        if isinstance(node, exp.Cast | exp.TryCast):
            return self.value(node.this)
        if type(node) in _FUNCTIONS:
            inner = self.value(node.this)
            return Value(f"{_FUNCTIONS[type(node)]}({inner.promql})", inner.scalar)
        if isinstance(node, exp.Greatest | exp.Least):
            return self._extreme(node)
        raise Inexpressible(f"{_sql(node)!r} has no PromQL form here")

    def _extreme(self, node: exp.Greatest | exp.Least) -> Value:
        """greatest/least skipping nulls, as Spark's: `(a >= b or b) or a` keeps a where both are
        there and a wins, b where b wins or a is missing, a where b is missing."""
        keep = ">=" if isinstance(node, exp.Greatest) else "<="
        clamp = "clamp_min" if isinstance(node, exp.Greatest) else "clamp_max"
        result = self.value(node.this)
        for argument in node.expressions:
            other = self.value(argument)
            if result.scalar and other.scalar:
                raise Inexpressible(f"{_sql(node)!r} of constants only")
            if other.scalar or result.scalar:
                vector, scalar = (result, other) if other.scalar else (other, result)
                result = Value(f"{clamp}({vector.promql}, {scalar.promql})", scalar=False)
                continue
            a, b = _group(result.promql), _group(other.promql)
            result = Value(f"(({a} {keep} {b}) or {b}) or {a}", scalar=False)
        return result

    def _vector(self, node: exp.Expression) -> str:
        if not isinstance(node, exp.Column):
            return self.value(node).promql
        return self._served(node.name).read()

    def _served(self, name: str) -> ServedColumn:
        served = self.served.get(name)
        if served is None:
            raise Inexpressible(f"/metrics does not serve column {name!r} of entity {self.entity}")
        return served


def _and(left: Filter, right: Filter) -> Filter:
    positives = [p for p in (left.positive, right.positive) if p is not None]
    positive = " and ".join(_group(p) for p in positives) if positives else None
    if len(positives) == 1:
        positive = positives[0]
    return Filter(positive, left.negatives + right.negatives, left.keyed + right.keyed)


def _group(promql: str) -> str:
    """`promql` in parentheses unless it is one selector or one call."""
    return promql if _SIMPLE.fullmatch(promql) else f"({promql})"


def parse(text: str) -> exp.Expression:
    try:
        return cast(exp.Expression, sqlglot.parse_one(text, read="spark"))
    except sqlglot.errors.SqlglotError as exc:
        raise Inexpressible(f"{text!r} does not parse: {exc}") from exc


def _text(node: exp.Expression) -> str:
    if not (isinstance(node, exp.Literal) and node.is_string):
        raise Inexpressible(f"{_sql(node)!r}: compare a text column with a text")
    return str(node.this)


def _sql(node: exp.Expression) -> str:
    return node.sql(dialect="spark")
