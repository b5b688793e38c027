"""The builder op namespace (`from xlapy.builder import ops; ops.Add(x, y)`), one module per
family; each family module lists its public ops in `__all__`. Each op function is wrapped so
that a value of the wrong Python type is a BuilderError naming the op (`_checked`)."""

import functools as _functools
import inspect as _inspect
from typing import Any as _Any

from xlapy.builder.enums import *  # noqa: F403
from xlapy.builder.ops_collectives import *  # noqa: F403
from xlapy.builder.ops_control_flow import *  # noqa: F403
from xlapy.builder.ops_core import *  # noqa: F403
from xlapy.builder.ops_custom_call import *  # noqa: F403
from xlapy.builder.ops_elementwise import *  # noqa: F403
from xlapy.builder.ops_indexing import *  # noqa: F403
from xlapy.builder.ops_linalg import *  # noqa: F403
from xlapy.builder.ops_linalg_decomp import *  # noqa: F403
from xlapy.builder.ops_misc import *  # noqa: F403
from xlapy.builder.ops_reduction import *  # noqa: F403
from xlapy.builder.ops_rng import *  # noqa: F403
from xlapy.builder.ops_shape import *  # noqa: F403
from xlapy.builder.ops_special import *  # noqa: F403
from xlapy.builder.ops_special_igamma import *  # noqa: F403
from xlapy.builder.ops_topk import *  # noqa: F403
from xlapy.builder.xla_builder import XlaBuilder as _XlaBuilder
from xlapy.builder.xla_builder import XlaOp as _XlaOp
from xlapy.errors import BuilderError as _BuilderError

# ---- wrong Python values become BuilderErrors naming the op ------------------------------------

#: What converting an argument of the wrong Python type raises inside an op function.
_ARGUMENT_ERRORS = (TypeError, ValueError, AttributeError, IndexError, KeyError, OverflowError)


def _builder_in(args: tuple[_Any, ...], kwargs: dict[str, _Any]) -> _XlaBuilder | None:
    values = list(args) + list(kwargs.values())
    for v in values:
        if isinstance(v, _XlaBuilder):
            return v
    for v in values:
        for x in (v if isinstance(v, (list, tuple)) else [v]):
            if isinstance(x, _XlaOp):
                return x.builder
    return None


def _checked(name: str, fn: _Any) -> _Any:
    """`fn` with an argument of the wrong Python type (None for an operand, a string for a
    dimension list, ...) reported as a BuilderError naming `name`: recorded on the builder
    found among the arguments for build() (raised at once in die-immediately mode), raised
    here when there is none. Calls with the wrong number of arguments stay TypeErrors."""

    signature = _inspect.signature(fn)

    @_functools.wraps(fn)
    def op(*args: _Any, **kwargs: _Any) -> _Any:
        signature.bind(*args, **kwargs)  # a wrong number of arguments stays a TypeError
        try:
            return fn(*args, **kwargs)
        except _ARGUMENT_ERRORS as e:
            if isinstance(e, TypeError) and str(e).startswith(f"{name} takes"):
                raise  # the op's own arity check (Conditional's forms)
            message = f"bad argument ({type(e).__name__}: {e})"
            builder = _builder_in(args, kwargs)
            if builder is None:
                raise _BuilderError(f"{name}: {message}") from e
            return builder.report_error(name, message)

    return op


for _name, _fn in list(globals().items()):
    if _name[:1].isupper() and _inspect.isfunction(_fn) and _fn.__module__.startswith(
            "xlapy.builder.ops_") and not _fn.__annotations__.get("return", "").startswith(
            ("list", "PaddingConfig")):
        globals()[_name] = _checked(_name, _fn)
del _name, _fn
