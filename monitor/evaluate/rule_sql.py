"""The Spark SQL of alert rules, checked without Spark: a condition or value over one entity's
columns (`monitor.core.derived`), the columns it reads, and the bound a dashboard can colour a
column by. sqlglot parses the Spark dialect; type inference is a best effort and Spark has the
last word when the rule runs."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable
from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify_columns import qualify_columns
from sqlglot.schema import MappingSchema

from monitor.core.derived import columns_of

_MISSING_PART = re.compile(r"Required keyword: '(\w+)' missing for <class '[\w.]*?(\w+)'>")


def suggest(name: str, allowed: Iterable[str], entity: str) -> str:
    """The allowed names closest to `name`: similar spelling first, then those containing it."""
    names = sorted(allowed)
    close = difflib.get_close_matches(name, names, n=4, cutoff=0.5)
    close += [n for n in names if name.lower() in n.lower() and n not in close]
    if close:
        return f"did you mean {close[0]}? (close: {', '.join(close[:4])})"
    return f"`kafka-health rules columns {entity}` lists the {len(names)} columns"


def expression_problems(text: str, entity: str, *, boolean: bool) -> list[str]:
    """Why `text` is not a valid Spark SQL expression over `entity`'s columns (empty when fine).

    `boolean` asks for a condition; otherwise the expression is a value reported as a double.
    """
    try:
        statements = sqlglot.parse(text, read="spark")
    except sqlglot.errors.ParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        where = f" at column {first['col']}" if first.get("col") else ""
        description = _MISSING_PART.sub(
            r"incomplete \2: its \1 is missing", str(first.get("description", exc))
        )
        return [f"not valid Spark SQL{where}: {description} in {text!r}"]
    except sqlglot.errors.SqlglotError as exc:
        return [f"not valid Spark SQL: {exc} in {text!r}"]
    if len(statements) != 1 or statements[0] is None:
        return [f"must be exactly one expression, without ';': {text!r}"]
    tree = statements[0]
    if isinstance(tree, exp.Alias) or tree.find(exp.Alias):
        return [f"unexpected word after an expression (a missing AND/OR or operator?) in {text!r}"]
    if not isinstance(tree, exp.Condition) or not isinstance(tree, exp.Expression):
        return [f"must be an expression over one row, not a statement or a subquery: {text!r}"]
    if tree.find(exp.Query, exp.Command, exp.DDL, exp.DML):
        return [f"must be an expression over one row, not a statement or a subquery: {text!r}"]
    if tree.find(exp.AggFunc, exp.Window):
        return [f"aggregate and window functions are not allowed (a rule sees one row at a time): {text!r}"]

    allowed = columns_of(entity)
    lambda_params = {
        ident.name for lam in tree.find_all(exp.Lambda) for ident in lam.expressions if ident.name
    }
    problems = []
    for column in tree.find_all(exp.Column):
        name = column.name
        if column.table:
            problems.append(f"write the column without a qualifier: {column.sql(dialect='spark')!r}")
        elif name not in allowed and name not in lambda_params:
            problems.append(f"unknown column {name!r} for entity {entity}; {suggest(name, allowed, entity)}")
    if problems:
        return problems
    return _type_problems(tree, entity, boolean=boolean, text=text)


@lru_cache(maxsize=512)
def columns_in(text: str) -> frozenset[str]:
    """The columns `text` reads (lambda parameters are not columns); empty when it does not parse."""
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except sqlglot.errors.SqlglotError:
        return frozenset()
    params = {ident.name for lam in tree.find_all(exp.Lambda) for ident in lam.expressions if ident.name}
    return frozenset(c.name for c in tree.find_all(exp.Column) if c.name not in params)


def _type_problems(tree: exp.Expression, entity: str, *, boolean: bool, text: str) -> list[str]:
    schema = MappingSchema({"t": {c.name: c.type for c in columns_of(entity).values()}}, dialect="spark")
    try:
        select = exp.select(tree.copy()).from_("t")
        typed = annotate_types(qualify_columns(select, schema=schema, dialect="spark"), schema=schema)
        kind = typed.selects[0].type
    except Exception:  # type inference is a best effort; Spark has the last word
        return []
    if kind is None or kind.is_type(exp.DataType.Type.UNKNOWN, exp.DataType.Type.NULL):
        return []
    name = kind.sql(dialect="spark").lower()
    if boolean and not kind.is_type(exp.DataType.Type.BOOLEAN):
        return [f"must be true or false, but {text!r} is a {name}; compare it, e.g. ({text}) > 0"]
    numeric = kind.is_type(*exp.DataType.NUMERIC_TYPES, exp.DataType.Type.BOOLEAN)
    if not boolean and not numeric:
        return [f"must be a number (it is reported as a double), but {text!r} is a {name}"]
    return []


def upper_bound(when: str | None, column: str) -> float | None:
    """The bound B of a tier's `when` that reads `column < B` (or `column <= B`, `B > column`,
    `B >= column`), B a number: the form a dashboard can colour `column` by without Spark.
    `<=` gives the next float above B, so `value < bound` holds exactly where the tier does.
    None for any other form (a compound condition, another column, no `when`)."""
    if when is None:
        return None
    try:
        tree = sqlglot.parse_one(when, read="spark")
    except sqlglot.errors.SqlglotError:
        return None
    while isinstance(tree, exp.Paren):
        tree = tree.this
    if isinstance(tree, exp.GT | exp.GTE):  # B > column reads column < B
        inclusive, side, bound = isinstance(tree, exp.GTE), tree.expression, tree.this
    elif isinstance(tree, exp.LT | exp.LTE):
        inclusive, side, bound = isinstance(tree, exp.LTE), tree.this, tree.expression
    else:
        return None
    negative = isinstance(bound, exp.Neg)
    number = bound.this if negative else bound
    if not (isinstance(side, exp.Column) and side.name == column and not side.table):
        return None
    if not (isinstance(number, exp.Literal) and not number.is_string):
        return None
    value = -float(number.this) if negative else float(number.this)
    return math.nextafter(value, math.inf) if inclusive else value
