import numpy as np
import pytest

import xlapy
from xlapy.builder import XlaBuilder, ops
from xlapy.errors import InterpreterError, XlapyError
from xlapy.types import ElementType, Literal, Shape

F32 = ElementType.F32


def _double() -> xlapy.XlaComputation:
    b = XlaBuilder("double")
    x = ops.Parameter(b, 0, Shape.array(F32, [3]))
    ops.Add(x, x)
    return b.build()


def test_transfer_compile_execute_transfer_back() -> None:
    client = xlapy.Client()
    data = client.transfer_to_server(Literal.from_numpy(np.array([1, 2, 3], np.float32)))
    exe = client.compile(_double())
    out = exe.execute([data])  # compile once, execute many
    again = exe.execute([out])
    assert client.transfer_to_client(again).to_numpy().tolist() == [4, 8, 12]
    assert client.execute_and_transfer(_double(), [data]).to_numpy().tolist() == [2, 4, 6]


def test_local_client_singleton_and_layouts() -> None:
    c = xlapy.ClientLibrary.local_client()
    assert c is xlapy.ClientLibrary.local_client()
    data = c.transfer_to_server(np.arange(6, dtype=np.float32).reshape(2, 3))
    lit = c.transfer_to_client(data, Shape.array(F32, [2, 3], [0, 1]))
    assert lit.to_physical().tolist() == [0, 3, 1, 4, 2, 5]


def test_bad_arguments_are_clear() -> None:
    client = xlapy.Client()
    with pytest.raises(InterpreterError, match="takes 1 argument"):
        client.execute_and_transfer(_double(), [])
    with pytest.raises(InterpreterError, match=r"expected f32\[3\], got float32\[4\]"):
        client.execute_and_transfer(_double(), [np.zeros(4, np.float32)])
    with pytest.raises(XlapyError, match="unknown backend 'tpu'"):
        xlapy.Client("tpu")
    data = client.transfer_to_server(np.zeros(3, np.float32))
    data.deallocate()
    with pytest.raises(XlapyError, match="deallocated"):
        client.execute_and_transfer(_double(), [data])
    with pytest.raises(XlapyError, match="another client"):
        xlapy.Client().execute_and_transfer(_double(), [client.transfer_to_server(
            np.zeros(3, np.float32))])
