"""Layer 9: the client/service API."""

from xlapy.runtime.client import Client, ClientLibrary, Executable, GlobalData

__all__ = ["Client", "ClientLibrary", "Executable", "GlobalData"]
