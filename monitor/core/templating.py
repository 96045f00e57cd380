"""The sandbox that templates an operator writes render in (rule summaries and descriptions,
notification templates): jinja2's immutable sandbox, bounded in what one template may cost.

jinja2's sandbox keeps a template away from Python internals, but not from costs: `{{ 10**5000 }}`
makes a number Python refuses to print, `{{ 'a' * 10**8 }}` a 100 MB string, two nested loops
over `range(100000)` run for hours. Here every way a template can make something large is checked
before it is made (powers and products of numbers, repeated and joined text, widths in format
specifications, size arguments of filters and methods), the text a render produces is capped,
and a render that runs longer than its time is stopped. A template that passes a bound raises
`TemplateLimitError` (a `jinja2.TemplateError`), whose message says which bound and how to stay
within it: `rules check` refuses such a template when it renders it on a sample finding, and the
stages turn it into their fallback text.
"""

from __future__ import annotations

import contextlib
import functools
import re
import string
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any, Final

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.nodes import Concat
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

from monitor.core.formatting import ROW_VALUE_FILTERS

MAX_TEMPLATE_TEXT: Final = 65_536
"""Characters a rule's summary or description may render to, and the longest text (or list) one
step of a template may build; also the largest size argument (a width, a count) it may pass."""

MAX_TEMPLATE_NUMBER_BITS: Final = 256
"""Bits of the largest whole number a template may compute (about 10**77)."""

RENDER_SECONDS: Final = 1.0
"""Time one render of a rule's template may take; a summary takes well under a millisecond."""

_SIZE_FREE_FILTERS: Final = frozenset({"default", "d", "format", *ROW_VALUE_FILTERS})
"""Filters whose extra arguments are values, not sizes (`format` has its specification checked;
the consumer advice takes a group's offset lag, millions of messages)."""

_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")
_DIGITS = re.compile(r"\d+")


class TemplateLimitError(jinja2.TemplateError):
    """A template asked for more than a bound of this module allows; the message says which."""


def _too_long(what: str) -> TemplateLimitError:
    return TemplateLimitError(
        f"{what} would be longer than {MAX_TEMPLATE_TEXT:,} characters or items; build shorter text"
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_sizes(args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    for value in (*args, *kwargs.values()):
        if _is_int(value) and abs(value) > MAX_TEMPLATE_TEXT:
            raise TemplateLimitError(
                f"a size of {value} passed to a filter or method is larger than {MAX_TEMPLATE_TEXT:,}; "
                "use a smaller width or count"
            )


def _check_spec_numbers(spec: str) -> None:
    if any(len(digits) > 6 or int(digits) > MAX_TEMPLATE_TEXT for digits in _DIGITS.findall(spec)):
        raise _too_long(f"a field formatted as {spec[:40]!r}")


def _check_format_string(text: str) -> None:
    """A `str.format` specification with no width or precision beyond the bound."""
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise TemplateLimitError(f"format string {text[:40]!r} is not valid: {exc}") from None
    for _, _, spec, _ in fields:
        if spec and "{" in spec:
            raise TemplateLimitError("a width or precision taken from an argument ({:{w}}) is not allowed")
        if spec:
            _check_spec_numbers(spec)


def _check_percent_string(text: str) -> None:
    """A printf-style (`%`) format with no width or precision beyond the bound."""
    for found in _PERCENT_SPEC.finditer(text):
        if "*" in found.group():
            raise TemplateLimitError("a width or precision taken from an argument (%*d) is not allowed")
        _check_spec_numbers(found.group())


def _check_binop(operator: str, left: Any, right: Any) -> None:
    sequence = (str, list, tuple)
    if operator == "**" and _is_int(left) and _is_int(right) and right > 0 and abs(left) > 1:
        # (bits of |left| - 1) * right is at most the result's bits: 2**200 passes, 3**200 does not
        if (
            right > MAX_TEMPLATE_NUMBER_BITS
            or (abs(left).bit_length() - 1) * right >= MAX_TEMPLATE_NUMBER_BITS
        ):
            power = f"{str(left)[:20]} ** {str(right)[:20]}"
            raise TemplateLimitError(
                f"{power} is beyond 2**{MAX_TEMPLATE_NUMBER_BITS}; numbers in a template stay smaller"
            )
    elif operator == "*":
        if _is_int(left) and _is_int(right):
            if left.bit_length() + right.bit_length() > MAX_TEMPLATE_NUMBER_BITS:
                raise TemplateLimitError(
                    f"a product beyond 2**{MAX_TEMPLATE_NUMBER_BITS}; numbers in a template stay smaller"
                )
        elif (isinstance(left, sequence) and _is_int(right)) or (
            isinstance(right, sequence) and _is_int(left)
        ):
            items, times = (left, right) if isinstance(left, sequence) else (right, left)
            if len(items) * times > MAX_TEMPLATE_TEXT:
                raise _too_long("a repeated text or list")
    elif operator == "+" and isinstance(left, sequence) and isinstance(right, sequence):
        if len(left) + len(right) > MAX_TEMPLATE_TEXT:
            raise _too_long("a joined text or list")
    elif operator == "%" and isinstance(left, str):
        _check_percent_string(left)


def _guarded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """`func` with its size arguments checked first (and the parts of a `join`)."""
    value_at = 1 if getattr(func, "jinja_pass_arg", None) is not None else 0

    @functools.wraps(func)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if name == "format" and isinstance(args[value_at], str):
            _check_percent_string(args[value_at])
        elif name not in _SIZE_FREE_FILTERS:
            _check_sizes(args[value_at + 1 :], kwargs)
        parts = args[value_at]
        if (
            name == "join"
            and isinstance(parts, list | tuple)
            and sum(map(len, map(str, parts))) > MAX_TEMPLATE_TEXT
        ):
            raise _too_long("a joined text")
        return func(*args, **kwargs)

    return guarded


def checked_join(join: Callable[[Sequence[Any]], str], parts: Sequence[Any]) -> str:
    """The `~` operator: `join(parts)` once the parts are known to be short enough together."""
    if sum(len(str(part)) for part in parts) > MAX_TEMPLATE_TEXT:
        raise _too_long("a text joined with ~")
    return join(parts)


REPEATING: Final = (
    nodes.For, nodes.Macro, nodes.CallBlock, nodes.Block, nodes.Extends, nodes.Include, nodes.Import,
    nodes.FromImport,
)  # fmt: skip
"""What can run a template's own lines more than once: a loop, a macro or call block (a function
of the template that can call itself), a block (`self.name()` calls it), another template."""

RUNS_ONCE: Final = "runs_once"
"""The name of the compiled template's module-level flag: True when its source holds none of
`REPEATING`, so each of its lines runs at most once and its time is bounded by its length (what
it calls is bounded by the checks of this module): `render_bounded` then has nothing to watch."""


class _BoundedCodeGenerator(CodeGenerator):
    """Compiles `a ~ b` to `environment.checked_join(...)`: jinja2 does not route `~` through
    `call_binop`, so it is the one operator that needs the compiler to check it. Writes the
    `RUNS_ONCE` flag."""

    def visit_Template(self, node: nodes.Template, frame: Frame | None = None) -> None:
        super().visit_Template(node, frame)
        self.writeline(f"{RUNS_ONCE} = {next(node.find_all(REPEATING), None) is None}")

    def visit_Concat(self, node: Concat, frame: Frame) -> None:
        self.write("environment.checked_join(")
        if frame.eval_ctx.volatile:
            self.write("(markup_join if context.eval_ctx.volatile else str_join)")
        else:
            self.write("markup_join" if frame.eval_ctx.autoescape else "str_join")
        self.write(", (")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """jinja2's immutable sandbox with the bounds of this module; no `lipsum` global."""

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset({"**", "*", "+", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.globals.pop("lipsum", None)
        self.checked_join = checked_join
        self.filters = _GuardedFilters(self.filters)

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        _check_binop(operator, left, right)
        return super().call_binop(context, operator, left, right)

    def call(self, context: Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        target = getattr(obj, "__wrapped__", obj)
        owner = getattr(target, "__self__", None)
        if isinstance(owner, str) and getattr(target, "__name__", "") in ("format", "format_map"):
            _check_format_string(owner)
        elif isinstance(owner, str | list | tuple):  # ljust, center, zfill, expandtabs ...: sizes
            _check_sizes(args, kwargs)
        return super().call(context, obj, *args, **kwargs)


class _GuardedFilters(dict[str, Callable[..., Any]]):
    """The environment's filters; each one added is guarded (`env.filters.update(...)` too)."""

    def __init__(self, filters: Mapping[str, Callable[..., Any]]) -> None:
        super().__init__()
        self.update(filters)

    def __setitem__(self, name: str, func: Callable[..., Any]) -> None:
        super().__setitem__(name, _guarded_filter(name, func))

    def update(self, *others: Any, **more: Callable[..., Any]) -> None:
        for name, func in dict(*others, **more).items():
            self[name] = func


@contextmanager
def _deadline(seconds: float, code_file: str) -> Iterator[None]:
    """Stop the template's own code (the frames compiled from `code_file`) after `seconds`; what
    it calls (filters, methods) is bounded by the checks above, so only its lines are watched."""
    at = time.monotonic() + seconds

    def each_line(frame: FrameType, event: str, arg: Any) -> Any:
        if time.monotonic() > at:
            raise TemplateLimitError(
                f"rendering took longer than {seconds:g} s; loop over less (range, nested for)"
            )
        return each_line

    def each_call(frame: FrameType, event: str, arg: Any) -> Any:
        return each_line if frame.f_code.co_filename == code_file else None

    previous = sys.gettrace()
    sys.settrace(each_call)
    try:
        yield
    finally:
        sys.settrace(previous)


def render_bounded(
    template: jinja2.Template,
    context: Mapping[str, Any],
    *,
    limit: int = MAX_TEMPLATE_TEXT,
    seconds: float = RENDER_SECONDS,
    truncate: bool = False,
) -> str:
    """The template's text, rendered within `seconds` and `limit` characters.

    Past `limit`, the text is cut there and ends with a note saying so when `truncate`, else
    TemplateLimitError is raised; a render past `seconds`, or a step beyond a bound, raises it.
    Other template errors (an undefined name, a refused attribute) propagate as jinja2 raises them.
    The time is watched only where the template can repeat (`RUNS_ONCE`): watching costs twice
    the render itself (a summary 0.3 ms instead of 0.1).
    """
    parts: list[str] = []
    size = 0
    once = template.root_render_func.__globals__.get(RUNS_ONCE) is True
    with contextlib.nullcontext() if once else _deadline(seconds, template.filename or "<template>"):
        for chunk in template.generate(context):
            size += len(chunk)
            if size > limit:
                if not truncate:
                    raise TemplateLimitError(f"the text is longer than {limit:,} characters; shorten it")
                parts.append(chunk[: len(chunk) - (size - limit)])
                parts.append(f" [truncated: longer than {limit:,} characters]")
                break
            parts.append(chunk)
    return "".join(parts)
