"""OneFlow's default-session query: one MultiClientSession per process.

    sess = session_context.GetDefaultSession()
"""

from oneflow.framework.multi_client_session import MultiClientSession

_default_session = MultiClientSession()


def GetDefaultSession():
    return _default_session
