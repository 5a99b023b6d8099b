"""OneFlow's session object: the process's runtime, which this build starts when oneflow is
imported (and stops at exit). TryInit() is therefore already done; status reports it.

    sess = oneflow.framework.session_context.GetDefaultSession()
    sess.TryInit(); assert sess.status == sess.Status.INITED
"""

import enum


class MultiClientSession:
    class Status(enum.Enum):
        CREATED = 1
        INITED = 2
        CLOSED = 3

    def __init__(self, env=None, sess_id=0):
        self.id = sess_id
        self.status = MultiClientSession.Status.INITED  # the runtime starts with the import

    def TryInit(self):
        if self.status == MultiClientSession.Status.CLOSED:
            raise RuntimeError("MultiClientSession.TryInit: the session was closed")

    def TryClose(self):
        self.status = MultiClientSession.Status.CLOSED
