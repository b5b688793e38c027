"""The builder op namespace (`from xlapy.builder import ops; ops.Add(x, y)`), one module per
family; each family module lists its public ops in `__all__`."""

from xlapy.builder.ops_collectives import *  # noqa: F403
from xlapy.builder.ops_control_flow import *  # noqa: F403
from xlapy.builder.ops_core import *  # noqa: F403
from xlapy.builder.ops_elementwise import *  # noqa: F403
from xlapy.builder.ops_indexing import *  # noqa: F403
from xlapy.builder.ops_linalg import *  # noqa: F403
from xlapy.builder.ops_misc import *  # noqa: F403
from xlapy.builder.ops_reduction import *  # noqa: F403
from xlapy.builder.ops_rng import *  # noqa: F403
from xlapy.builder.ops_shape import *  # noqa: F403
