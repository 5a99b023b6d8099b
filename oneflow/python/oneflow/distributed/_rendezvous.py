"""How the launchers of several nodes agree on restarts (--max_restarts) and on the world after
one (--nnodes MIN:MAX): node 0's launcher serves a small rendezvous over TCP, every launcher
(node 0's too) is a client of it, torchrun's agents and their store in miniature.

    server = RendezvousServer(port, min_nodes=1, max_nodes=2, join_timeout=60, job="...")
    client = RendezvousClient("10.0.0.1", port, node=1, job="...", nproc=2, timeout=60)
    world = client.join(None, timeout=60, should_stop=lambda: False)  # {"round": 0, "nodes": ...}
    client.send(op="failed", round=0, why="rank 3 (node 1) was killed by SIGKILL")  # or op="done"
    client.poll()                          # {"op": "restart", "why": ...}, "finished", "lost"

The protocol is JSON lines. A round is one start of the worker group: launchers join it, it
closes when every node expected has joined (round 0: --nnodes MAX nodes; a restart: the nodes
of the last round, a node whose launcher is gone included: it may be started again), or at the
join timeout with at least MIN nodes; every member then gets the world (the nodes in node
order, renumbered from 0). When a member reports a failure, or its connection closes, or it
sends nothing for HEARTBEAT_TIMEOUT_S, every launcher is told to restart and the next round
opens. When every member is done, every launcher is told the job finished. Nothing waits
without a deadline: clients ping every second and give up on a silent server after
HEARTBEAT_TIMEOUT_S.
"""

import json
import queue
import socket
import threading
import time

HEARTBEAT_TIMEOUT_S = 15.0
_PING_S = 1.0


class RendezvousError(Exception):
    """The rendezvous cannot go on (one line for the user)."""


def _send(sock, lock, msg):
    data = (json.dumps(msg) + "\n").encode()
    with lock:
        sock.sendall(data)


def _lines(sock):
    """The JSON messages arriving on sock; ends at EOF, raises OSError / socket.timeout."""
    buf = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                yield json.loads(line)


class RendezvousServer:
    """Node 0's side. Every decision is taken under one lock from the events of the
    connections (join, failed, done, closed) and a timer for the join timeout."""

    def __init__(self, port, min_nodes, max_nodes, join_timeout, job, host=""):
        self.min_nodes, self.max_nodes = min_nodes, max_nodes
        self.join_timeout, self.job = join_timeout, job
        self.sock = socket.create_server((host, port))
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.conns = {}          # node -> (socket, send lock)
        self.round = 0
        self.phase = "joining"   # joining | running | finished | over
        self.joiners = {}        # node -> nproc, this round
        self.members = []        # nodes of the round now running (or last run)
        self.done = set()
        self.opened = time.monotonic()
        self.stopped = False
        threading.Thread(target=self._accept, name="rendezvous accept", daemon=True).start()
        threading.Thread(target=self._tick, name="rendezvous timer", daemon=True).start()

    def close(self):
        self.stopped = True
        try:
            self.sock.close()
        except OSError:
            pass

    # -- connections ---------------------------------------------------------------------
    def _accept(self):
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), name="rendezvous conn",
                             daemon=True).start()

    def _serve(self, conn):
        node, lock = None, threading.Lock()
        why = "its connection closed"
        conn.settimeout(HEARTBEAT_TIMEOUT_S)
        try:
            for msg in _lines(conn):
                op = msg.get("op")
                if op == "ping":
                    _send(conn, lock, {"op": "pong"})
                    continue
                if node is None:
                    node = self._hello(conn, lock, msg)
                    if node is None:
                        return
                    continue
                with self.lock:
                    if op == "join":
                        self._join(node, msg)
                    elif op == "failed":
                        self._failed(msg.get("round"), msg.get("why", "?"))
                    elif op == "done":
                        self._done(node, msg.get("round"))
        except socket.timeout:
            why = f"its launcher sent nothing for {HEARTBEAT_TIMEOUT_S:g} s"
        except (OSError, ValueError):
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass
            if node is not None:
                with self.lock:
                    if self.conns.get(node, (None,))[0] is conn:
                        del self.conns[node]
                        self._closed(node, why)

    def _hello(self, conn, lock, msg):
        node = msg.get("node")
        refusal = None
        if msg.get("op") != "hello" or not isinstance(node, int):
            refusal = "expected a hello"
        elif msg.get("job") != self.job:
            refusal = (f"node {node} runs '{msg.get('job')}' but node 0 runs '{self.job}' (start "
                       f"every node with the same command and settings)")
        else:
            with self.lock:
                if node in self.conns:
                    refusal = (f"node {node} is already connected (two launchers with "
                               f"--node_rank {node}?)")
                elif not 0 <= node < self.max_nodes:
                    refusal = f"node {node} is out of range for --nnodes MAX {self.max_nodes}"
                else:
                    self.conns[node] = (conn, lock)
                    return node
        try:
            _send(conn, lock, {"op": "error", "why": refusal})
        except OSError:
            pass
        return None

    def _broadcast(self, msg, nodes=None):
        for node, (conn, lock) in list(self.conns.items()):
            if nodes is None or node in nodes:
                try:
                    _send(conn, lock, msg)
                except OSError:
                    pass

    # -- events (under self.lock) ---------------------------------------------------------
    def _join(self, node, msg):
        # round None: a launcher that just started, for whichever round is open
        if msg.get("round") not in (None, self.round) or self.phase != "joining":
            self._broadcast({"op": "error", "why": (
                f"node {node} cannot join: the job is {self.phase} (round {self.round}); it "
                f"takes nodes only when it starts or restarts")}, [node])
            return
        self.joiners[node] = msg.get("nproc")
        self._maybe_close(timed_out=False)

    def _expected(self):
        if self.round == 0:
            return self.max_nodes
        # A restart waits for every node of the last round (a launcher that is gone may be
        # started again) until the join timeout, and takes any other that joins meanwhile.
        return min(self.max_nodes, len(set(self.members) | set(self.joiners)))

    def _maybe_close(self, timed_out):
        n = len(self.joiners)
        if n >= self.min_nodes and (n >= self._expected() or timed_out):
            nprocs = set(self.joiners.values())
            nodes = sorted(self.joiners)
            if len(nprocs) != 1:
                self._broadcast({"op": "error", "why": (
                    "the nodes start different numbers of processes (--nproc_per_node): " +
                    ", ".join(f"node {k}: {self.joiners[k]}" for k in nodes))}, nodes)
                self.phase = "over"
                return
            self.members, self.done, self.phase = nodes, set(), "running"
            self.joiners = {}
            for i, node in enumerate(nodes):
                self._broadcast({"op": "world", "round": self.round, "nodes": nodes,
                                 "node_rank": i}, [node])
        elif timed_out:
            self._broadcast({"op": "error", "why": (
                f"rendezvous: {n} node(s) joined round {self.round} within "
                f"{self.join_timeout:g} s (--join_timeout), --nnodes needs at least "
                f"{self.min_nodes}")}, list(self.joiners))
            self.phase = "over"

    def _failed(self, round_, why):
        if round_ != self.round or self.phase != "running":
            return  # the round already ended for another reason
        self._broadcast({"op": "restart", "round": self.round, "why": why})
        self.round += 1
        self.phase, self.joiners, self.opened = "joining", {}, time.monotonic()

    def _done(self, node, round_):
        if round_ != self.round or self.phase != "running":
            return
        self.done.add(node)
        if self.done >= set(self.members):
            self.phase = "finished"
            self._broadcast({"op": "finished", "round": self.round})

    def _closed(self, node, why):
        if self.phase == "running" and node in self.members and node not in self.done:
            self._failed(self.round, f"node {self.members.index(node)}'s launcher is gone ({why})")
        elif self.phase == "joining":
            self.joiners.pop(node, None)
            if self.joiners:
                self._maybe_close(timed_out=False)

    def _tick(self):
        while not self.stopped:
            time.sleep(0.2)
            with self.lock:
                if self.phase == "joining" and self.joiners and \
                        time.monotonic() - self.opened > self.join_timeout:
                    self._maybe_close(timed_out=True)


class RendezvousClient:
    """A launcher's side: one connection, a reader thread that queues the server's messages,
    a pinger."""

    def __init__(self, addr, port, node, job, nproc, timeout, should_stop=lambda: False):
        self.where = f"{addr}:{port}"
        self.node, self.nproc = node, nproc
        self.messages = queue.Queue()
        self.lock = threading.Lock()
        deadline = time.monotonic() + timeout
        while True:  # node 0's launcher may start after this one
            try:
                self.sock = socket.create_connection((addr, port), timeout=5)
                break
            except OSError as e:
                if time.monotonic() > deadline or should_stop():
                    raise RendezvousError(f"cannot reach the rendezvous of node 0's launcher at "
                                          f"{self.where} within {timeout:g} s "
                                          f"(--join_timeout): {e}") from None
                time.sleep(0.2)
        self.sock.settimeout(HEARTBEAT_TIMEOUT_S)
        _send(self.sock, self.lock, {"op": "hello", "node": node, "job": job})
        threading.Thread(target=self._read, name="rendezvous reader", daemon=True).start()
        threading.Thread(target=self._ping, name="rendezvous pinger", daemon=True).start()

    def _read(self):
        why = "its connection closed"
        try:
            for msg in _lines(self.sock):
                if msg.get("op") != "pong":
                    self.messages.put(msg)
        except socket.timeout:
            why = f"it sent nothing for {HEARTBEAT_TIMEOUT_S:g} s"
        except (OSError, ValueError) as e:
            why = str(e)
        self.messages.put({"op": "lost", "why": (
            f"lost the rendezvous at {self.where} (node 0's launcher is gone: {why})")})

    def _ping(self):
        while True:
            time.sleep(_PING_S)
            try:
                _send(self.sock, self.lock, {"op": "ping"})
            except OSError:
                return

    def send(self, **msg):
        try:
            _send(self.sock, self.lock, msg)
        except OSError:
            pass  # the reader reports the loss

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def poll(self):
        """The next message, or None."""
        try:
            return self.messages.get_nowait()
        except queue.Empty:
            return None

    def join(self, round_, timeout, should_stop):
        """The world of round round_ (None: of the round open now, for a launcher that just
        started): {"round": r, "nodes": [...], "node_rank": i}. Raises RendezvousError; returns
        None when should_stop() turned true."""
        self.send(op="join", round=round_, nproc=self.nproc)
        deadline = time.monotonic() + timeout + HEARTBEAT_TIMEOUT_S
        while True:
            if should_stop():
                return None
            if time.monotonic() > deadline:
                raise RendezvousError(f"rendezvous at {self.where}: no world for round {round_} "
                                      f"within {timeout:g} s (--join_timeout)")
            try:
                msg = self.messages.get(timeout=0.1)
            except queue.Empty:
                continue
            op = msg.get("op")
            if op == "world" and round_ in (None, msg.get("round")):
                return msg
            if op in ("error", "lost"):
                raise RendezvousError(msg["why"])
            # anything else is about an earlier round
