"""Kernel names as people read them: ``void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>,
...>(int, ...)`` → ``vectorized_elementwise_kernel<FillFunctor, …>``.

The demangled C++ name is kept whole in the tables and in SQL; pages show this short one with the whole name on
hover. Namespaces are trimmed, the parameter list dropped, and a template's arguments folded to the first one that
names something (a functor, an op, a tile shape), as torch-tb-profiler's and Nsight's short names do."""

from __future__ import annotations

import re

SHORT_LIMIT = 64
_ANONYMOUS = "(anonymous namespace)"
_NUMBER = re.compile(r"^[-+]?\d[\w.]*$|^(true|false)$|^\(.*\)\d*$|^(float|double|int|uint|half|char|short|long)\d$")
_TYPE_WORDS = frozenset({"bool", "char", "short", "int", "long", "float", "double", "unsigned", "signed", "void",
                         "half", "c10::Half", "c10::BFloat16", "__half", "__nv_bfloat16"})


def _split_top(text: str, separator: str) -> list[str]:
    """``text`` split at ``separator`` where it is outside every bracket pair."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch in "<({[":
            depth += 1
        elif ch in ">)}]":
            depth -= 1
        elif depth == 0 and text.startswith(separator, i):
            parts.append(text[start:i])
            start = i + len(separator)
            i = start
            continue
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def _head(name: str) -> str:
    """The name before its top-level parameter list, without a leading return type."""
    depth = 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and i > 0:
            name = name[:i]
            break
    words = _split_top(name, " ")
    return words[-1] if words else name


def _last_component(head: str) -> str:
    components = [c for c in _split_top(head, "::") if c and not c.startswith("{lambda")]
    return components[-1] if components else head


def _template(component: str) -> tuple[str, str | None]:
    """``ident<args>`` as (ident, args), or (component, None)."""
    at = component.find("<")
    if at <= 0 or not component.endswith(">"):
        return component, None
    return component[:at], component[at + 1:-1]


def _argument(arg: str) -> str | None:
    """A template argument as a short word, or None for numbers and plain types."""
    if _NUMBER.match(arg) or arg in _TYPE_WORDS or arg.rstrip("*& ").strip() in _TYPE_WORDS:
        return None
    ident, _ = _template(_last_component(_head(arg)))
    return ident or None


def short_kernel_name(name: str, limit: int = SHORT_LIMIT) -> str:
    """The kernel's name for people (see the module's docstring); a name that is not C++ stays as it is."""
    text = name.replace(_ANONYMOUS, "").replace("::::", "::").strip()
    ident, args = _template(_last_component(_head(text)))
    if args is not None:
        arguments = _split_top(args, ",")
        named = next((a for a in (_argument(a) for a in arguments) if a), None)
        ident = f"{ident}<{named}{', …' if len(arguments) > 1 else ''}>" if named else f"{ident}<…>"
    return ident if len(ident) <= limit else ident[: limit - 1] + "…"
