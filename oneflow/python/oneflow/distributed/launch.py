"""Start one process per local rank, torchrun style.

    python3 -m oneflow.distributed.launch [--nproc_per_node N] [--nnodes M] [--node_rank K]
        [--master_addr A] [--master_port P] [--ips H1,H2,...] [--logdir DIR] [--log_dir DIR]
        [--max_restarts N] [--nnodes MIN:MAX] [--term_timeout S] [--join_timeout S]
        [--rdzv_port P] [--no_python] [-m] script_or_module [args ...]

Every local rank r (0 <= r < N) gets the environment
    RANK = K*N + r, WORLD_SIZE = M*N, LOCAL_RANK = r, LOCAL_WORLD_SIZE = N,
    GROUP_RANK = NODE_RANK = K, MASTER_ADDR = A, MASTER_PORT = P,
    OMP_NUM_THREADS = 1 when N > 1 and it is not set already (one notice line says so),
and the same command on every node joins one job with nothing else set: the ranks' default job
token is what they share (command, sizes, master; see runtime/world.h), so another job on the
same port is refused, naming what differs. ONEFLOW_JOB_TOKEN, when set (the same on every
node), is a secret token instead.

PaddlePaddle's form: --ips=host1,host2 (one entry per node; this node's rank is the position of
one of its own addresses or its hostname in the list, the master is the first, at --master_port)
stands for --nnodes, --node_rank and --master_addr.
and runs `python -u script args` (`python -u -m module args` with -m, the program itself with
--no_python). Options also take torchrun's dashed spellings (--nproc-per-node, ...).

Output: every line a rank writes is copied to the launcher's stdout / stderr (whichever the
rank wrote it to) as `[rank R] line`, R the global rank. With --logdir DIR (or --log-dir) the
lines are ALSO written, unprefixed, to DIR/stdout_rank{R}.log and DIR/stderr_rank{R}.log; with
--log_dir DIR (MindSpore msrun's layout) to DIR/<node>/rank.<R>/stdout and .../stderr.

Restarts (torchrun's --max-restarts): with --max_restarts N, when a rank fails the launcher stops
the others as below and starts every rank again, at most N times; the ranks find the restart
count in TORCHELASTIC_RESTART_COUNT and ONEFLOW_RESTART_COUNT (N in TORCHELASTIC_MAX_RESTARTS and
ONEFLOW_MAX_RESTARTS). Each restart is one line on every launcher: why (rank, node, signal or exit
code), which try, the new world. Past N: one line naming the last failure, and the rank's exit
code (1 for a signal). On several nodes the launchers agree through a rendezvous that node 0's
launcher serves on --rdzv_port (default --master_port + 1; see _rendezvous.py): a failure on any
node restarts every rank of every node together; a node whose launcher is gone (or silent for
15 s) is noticed at once, and waited for (a launcher started again there joins) until
--join_timeout. --nnodes MIN:MAX: the job starts with MAX nodes (or, after --join_timeout,
with the MIN or more that came) and after a failure goes on with the nodes that come back
within --join_timeout if they are at least MIN, renumbered from 0 in their
--node_rank order (WORLD_SIZE, RANK, NODE_RANK and GROUP_WORLD_SIZE say the new world). Node 0
hosts the rendezvous and rank 0: the job cannot go on without it.

Children run in their own sessions (process groups) with stdin from /dev/null, so a Ctrl-C at
the terminal reaches only the launcher, which forwards SIGINT / SIGTERM / SIGHUP to every
child's process group (a script can save its state then), waits up to --term_timeout seconds
(default 5), then SIGKILLs what is left (a second signal SIGKILLs at once); the launcher then
exits with 128 + the signal number (and, on several nodes with restarts, the others restart
without this node, as for a failure).

When a rank exits with a non-zero code (or is killed by a signal) the launcher prints one line
naming it, followed by the last lines of its stderr, sends SIGTERM to the other ranks' process
groups, SIGKILL after --term_timeout, and exits with the rank's exit code (1 when a signal
killed it). Process groups are also killed when all ranks are done, so no grandchild outlives
the job; children get PR_SET_PDEATHSIG(SIGKILL) on Linux in case the launcher itself is killed.
"""

import argparse
import collections
import os
import socket
import shutil
import signal
import subprocess
import sys
import threading
import time

PROG = "oneflow.distributed.launch"
GRACE_PERIOD_S = 5.0   # --term_timeout's default
JOIN_TIMEOUT_S = 60.0  # --join_timeout's default
TAIL_LINES = 20
_POLL_S = 0.05
_FINISH_NOTE_S = 30.0  # a node done before the others says so once after this long
_FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line: `oneflow.distributed.launch: error: ...`."""

    def error(self, message):
        # "argument --nnodes: --nnodes must be ..." -> "--nnodes must be ..."
        head, sep, rest = message.partition(": ")
        if head.startswith("argument ") and rest.startswith("--"):
            message = rest
        raise UsageError(message)


def _int_arg(name, text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}")


def _positive_int(name):
    def parse(text):
        v = _int_arg(name, text)
        if v < 1:
            raise argparse.ArgumentTypeError(f"{name} must be at least 1, got {v}")
        return v

    return parse


def _nonneg_int(name):
    def parse(text):
        v = _int_arg(name, text)
        if v < 0:
            raise argparse.ArgumentTypeError(f"{name} must not be negative, got {v}")
        return v

    return parse


def _port_of(name):
    def parse(text):
        v = _int_arg(name, text)
        if not 1 <= v <= 65535:
            raise argparse.ArgumentTypeError(f"{name} {v} is not a port (1..65535)")
        return v

    return parse


_port = _port_of("--master_port")


def _positive_float(name):
    def parse(text):
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number of seconds, got {text!r}")
        if not v > 0:
            raise argparse.ArgumentTypeError(f"{name} must be positive, got {text}")
        return v

    return parse


def _nnodes(text):
    """N or MIN:MAX (torchrun's form) -> (MIN, MAX)."""
    if ":" not in text:
        n = _positive_int("--nnodes")(text)
        return n, n
    lo, _, hi = text.partition(":")
    lo, hi = _positive_int("--nnodes MIN")(lo), _positive_int("--nnodes MAX")(hi)
    if lo > hi:
        raise argparse.ArgumentTypeError(f"--nnodes {text}: MIN {lo} is larger than MAX {hi}")
    return lo, hi


def _build_parser():
    p = _Parser(
        prog=f"python3 -m {PROG}",
        description="Start one process per local rank with torchrun's environment variables.",
        allow_abbrev=False,
    )
    p.add_argument("--nproc_per_node", "--nproc-per-node", type=_positive_int("--nproc_per_node"),
                   default=1, help="processes (ranks) on this node (default 1)")
    p.add_argument("--nnodes", type=_nnodes, default=None,
                   help="number of nodes (default 1), or MIN:MAX: after a failure the job goes on "
                        "with the nodes that come back if they are at least MIN")
    p.add_argument("--node_rank", "--node-rank", type=_nonneg_int("--node_rank"), default=None,
                   help="this node's index, 0..nnodes-1 (default 0)")
    p.add_argument("--master_addr", "--master-addr", default=None,
                   help="address of the rank 0 node (default 127.0.0.1)")
    p.add_argument("--master_port", "--master-port", type=_port, default=29500,
                   help="port on the rank 0 node (default 29500)")
    p.add_argument("--ips", default=None,
                   help="PaddlePaddle's form: the nodes' hosts, master first (sets --nnodes, "
                        "--node_rank, --master_addr)")
    p.add_argument("--max_restarts", "--max-restarts", type=_nonneg_int("--max_restarts"),
                   default=0, help="restart every rank of every node together after a failure, at "
                                   "most this many times (default 0)")
    p.add_argument("--term_timeout", "--term-timeout", type=_positive_float("--term_timeout"),
                   default=GRACE_PERIOD_S, help="seconds between the SIGTERM that stops a rank and "
                   f"the SIGKILL (default {GRACE_PERIOD_S:g})")
    p.add_argument("--join_timeout", "--join-timeout", type=_positive_float("--join_timeout"),
                   default=JOIN_TIMEOUT_S, help="seconds the launchers of several nodes wait for "
                   f"each other at a start or restart (default {JOIN_TIMEOUT_S:g})")
    p.add_argument("--rdzv_port", "--rdzv-port", type=_port_of("--rdzv_port"), default=None,
                   help="port of node 0's launcher for the launchers' rendezvous, used with "
                        "--max_restarts or --nnodes MIN:MAX on several nodes (default: "
                        "--master_port + 1)")
    p.add_argument("--logdir", "--log-dir", default=None,
                   help="also write DIR/stdout_rank{R}.log and DIR/stderr_rank{R}.log")
    p.add_argument("--log_dir", dest="msrun_log_dir", default=None,
                   help="also write DIR/<node>/rank.<R>/stdout and stderr (msrun's layout)")
    p.add_argument("--no_python", "--no-python", action="store_true",
                   help="run the program directly instead of through python")
    p.add_argument("-m", "--module", action="store_true",
                   help="run the script as a module (python -m)")
    p.add_argument("--use_env", "--use-env", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("training_script", nargs="?", default=None,
                   help="the script (module with -m, program with --no_python)")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


def _local_names():
    """This host's names and addresses, for finding it in --ips."""
    names = {socket.gethostname(), socket.getfqdn()}
    try:
        names.update(a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None))
    except OSError:
        pass
    try:
        import fcntl
        import struct

        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for _, ifname in socket.if_nameindex():
                try:
                    packed = fcntl.ioctl(s.fileno(), 0x8915,  # SIOCGIFADDR
                                         struct.pack("256s", ifname[:15].encode()))
                    names.add(socket.inet_ntoa(packed[20:24]))
                except OSError:
                    pass
    except (OSError, ImportError):
        pass
    return names


def _apply_ips(args):
    hosts = [h.strip() for h in args.ips.split(",") if h.strip()]
    if not hosts:
        raise UsageError(f"--ips {args.ips!r} names no host")
    if len(set(hosts)) != len(hosts):
        raise UsageError(f"--ips {args.ips!r} names a host twice")
    for flag in ("nnodes", "node_rank", "master_addr"):
        if getattr(args, flag) is not None:
            raise UsageError(f"--ips sets --{flag}: give one or the other")
    mine = _local_names()
    here = [i for i, h in enumerate(hosts) if h in mine]
    if len(here) != 1:
        raise UsageError(
            f"--ips {args.ips}: " + ("none of the hosts is this machine" if not here else
                                      "several of the hosts are this machine")
            + f" (its names and addresses: {', '.join(sorted(mine))})")
    args.nnodes, args.node_rank, args.master_addr = len(hosts), here[0], hosts[0]


def parse_args(argv):
    args = _build_parser().parse_args(argv)
    if args.ips is not None:
        _apply_ips(args)
    if args.nnodes is None:
        args.nnodes = (1, 1)
    elif isinstance(args.nnodes, int):  # from --ips
        args.nnodes = (args.nnodes, args.nnodes)
    args.min_nnodes, args.nnodes = args.nnodes
    if args.node_rank is None:
        args.node_rank = 0
    if args.master_addr is None:
        args.master_addr = "127.0.0.1"
    if args.training_script is None:
        raise UsageError("missing the script to run (a module name with -m, a program with --no_python)")
    if args.node_rank >= args.nnodes:
        raise UsageError(f"--node_rank {args.node_rank} is out of range for --nnodes {args.nnodes}")
    if args.rdzv_port is None:
        args.rdzv_port = args.master_port % 65535 + 1
    if args.rdzv_port == args.master_port:
        raise UsageError(f"--rdzv_port {args.rdzv_port} is the --master_port (rank 0 listens "
                         f"there): give the launchers' rendezvous another port")
    if args.module and args.no_python:
        raise UsageError("-m and --no_python cannot be used together")
    if args.no_python:
        if shutil.which(args.training_script) is None:
            raise UsageError(f"program {args.training_script!r} not found or not executable")
    elif not args.module and not os.path.isfile(args.training_script):
        raise UsageError(f"script {args.training_script!r} not found")
    return args


def child_command(args):
    if args.no_python:
        return [args.training_script] + args.training_script_args
    if args.module:
        return [sys.executable, "-u", "-m", args.training_script] + args.training_script_args
    return [sys.executable, "-u", args.training_script] + args.training_script_args


def child_envs(args, base_env=None, node_rank=None, nnodes=None, restart=0):
    """The environments of this node's ranks, in local-rank order (node_rank and nnodes: the
    world of this start, after a restart with fewer nodes; restart: how many came before)."""
    base = dict(os.environ if base_env is None else base_env)
    node_rank = args.node_rank if node_rank is None else node_rank
    nnodes = args.nnodes if nnodes is None else nnodes
    envs = []
    for r in range(args.nproc_per_node):
        env = dict(base)
        env.update(
            RANK=str(node_rank * args.nproc_per_node + r),
            WORLD_SIZE=str(nnodes * args.nproc_per_node),
            LOCAL_RANK=str(r),
            LOCAL_WORLD_SIZE=str(args.nproc_per_node),
            GROUP_RANK=str(node_rank),
            NODE_RANK=str(node_rank),
            GROUP_WORLD_SIZE=str(nnodes),
            MASTER_ADDR=args.master_addr,
            MASTER_PORT=str(args.master_port),
            TORCHELASTIC_RESTART_COUNT=str(restart),
            TORCHELASTIC_MAX_RESTARTS=str(args.max_restarts),
            ONEFLOW_RESTART_COUNT=str(restart),
            ONEFLOW_MAX_RESTARTS=str(args.max_restarts),
        )
        if args.nproc_per_node > 1 and "OMP_NUM_THREADS" not in base:
            env["OMP_NUM_THREADS"] = "1"
        envs.append(env)
    return envs


def _signal_name(signum):
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _make_preexec():
    """PR_SET_PDEATHSIG(SIGKILL): a child dies with the launcher even if the launcher is
    SIGKILLed. Everything is looked up before fork; nothing is allocated in the child."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    PR_SET_PDEATHSIG = 1
    sigkill = int(signal.SIGKILL)
    getppid = os.getppid
    _exit = os._exit

    def preexec():
        prctl(PR_SET_PDEATHSIG, sigkill, 0, 0, 0)
        if getppid() != parent:  # the launcher died before prctl took effect
            _exit(1)

    return preexec


class _Output:
    """Writes prefixed lines to the launcher's stdout / stderr under one lock."""

    def __init__(self):
        self.lock = threading.Lock()

    def write(self, stream, data):
        with self.lock:
            try:
                buf = getattr(stream, "buffer", None)
                if buf is not None:
                    buf.write(data)
                else:
                    stream.write(data.decode("utf-8", "replace"))
                stream.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass


class _Rank:
    def __init__(self, rank, local_rank, proc):
        self.rank = rank
        self.local_rank = local_rank
        self.proc = proc
        self.stderr_tail = collections.deque(maxlen=TAIL_LINES)
        self.threads = []


def _pump(pipe, prefix, out, console, logfile, tail):
    try:
        for line in iter(pipe.readline, b""):
            if not line.endswith(b"\n"):
                line += b"\n"
            out.write(console, prefix + line)
            if logfile is not None:
                try:
                    logfile.write(line)
                    logfile.flush()
                except (ValueError, OSError):
                    pass
            if tail is not None:
                tail.append(line.decode("utf-8", "replace").rstrip("\n"))
    finally:
        pipe.close()
        if logfile is not None:
            logfile.close()


def _killpg(pid, sig):
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Launcher:
    def __init__(self, args, stdout=None, stderr=None):
        self.args = args
        self.stdout = stdout if stdout is not None else sys.stdout
        self.stderr = stderr if stderr is not None else sys.stderr
        self.out = _Output()
        self.ranks = []
        self.signal_received = None
        self.signal_count = 0
        self.server = None  # node 0's rendezvous server (several nodes that restart together)

    def note(self, msg):
        self.out.write(self.stderr, f"{PROG}: {msg}\n".encode("utf-8", "replace"))

    # -- signals -------------------------------------------------------------------------
    def _on_signal(self, signum, frame):
        self.signal_count += 1
        if self.signal_received is None:
            self.signal_received = signum
        sig = signum if self.signal_count == 1 else signal.SIGKILL
        for r in self.ranks:
            _killpg(r.proc.pid, sig)

    def _install_handlers(self):
        old = {}
        if threading.current_thread() is threading.main_thread():
            for s in _FORWARDED_SIGNALS:
                try:
                    old[s] = signal.signal(s, self._on_signal)
                except (ValueError, OSError):
                    pass
        return old

    # -- running -------------------------------------------------------------------------
    def _start(self, node_rank, nnodes, restart):
        args = self.args
        cmd = child_command(args)
        envs = child_envs(args, node_rank=node_rank, nnodes=nnodes, restart=restart)
        if args.nproc_per_node > 1 and "OMP_NUM_THREADS" not in os.environ and restart == 0:
            self.note("setting OMP_NUM_THREADS=1 for each process (it was unset) to avoid "
                      "overloading the system; set it yourself to tune performance")
        if args.logdir:
            os.makedirs(args.logdir, exist_ok=True)
        preexec = _make_preexec()
        # A restart appends to the log files of the start before.
        mode = "ab" if restart else "wb"
        for local_rank, env in enumerate(envs):
            if self.signal_received is not None:
                break
            rank = int(env["RANK"])
            try:
                proc = subprocess.Popen(
                    cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, start_new_session=True, preexec_fn=preexec)
            except OSError as e:
                self.note(f"could not start rank {rank}: {e}")
                return False
            self.ranks.append(_Rank(rank, local_rank, proc))
        # Readers start after every fork (a fork while threads run is best avoided).
        for r in self.ranks:
            prefix = f"[rank {r.rank}] ".encode()
            for pipe, console, name, tail in ((r.proc.stdout, self.stdout, "stdout", None),
                                              (r.proc.stderr, self.stderr, "stderr", r.stderr_tail)):
                logfile = None
                if args.logdir:
                    logfile = open(os.path.join(args.logdir, f"{name}_rank{r.rank}.log"), mode)
                elif args.msrun_log_dir:
                    folder = os.path.join(args.msrun_log_dir, str(node_rank), f"rank.{r.rank}")
                    os.makedirs(folder, exist_ok=True)
                    logfile = open(os.path.join(folder, name), mode)
                t = threading.Thread(target=_pump, args=(pipe, prefix, self.out, console, logfile, tail),
                                     name=f"{PROG} rank {r.rank} {name}", daemon=True)
                t.start()
                r.threads.append(t)
        return True

    def _wait_all(self, deadline):
        while time.monotonic() < deadline:
            if all(r.proc.poll() is not None for r in self.ranks):
                return True
            time.sleep(_POLL_S)
        return all(r.proc.poll() is not None for r in self.ranks)

    def _stop_all(self, sig, grace=None):
        """Send `sig` to every rank's process group, SIGKILL those left after `grace`
        (--term_timeout)."""
        grace = self.args.term_timeout if grace is None else grace
        for r in self.ranks:
            _killpg(r.proc.pid, sig)
        if not self._wait_all(time.monotonic() + grace):
            for r in self.ranks:
                if r.proc.poll() is None:
                    _killpg(r.proc.pid, signal.SIGKILL)
        for r in self.ranks:
            r.proc.wait()

    def _cleanup(self):
        # Grandchildren left in the ranks' process groups hold the pipes open: kill them.
        for r in self.ranks:
            _killpg(r.proc.pid, signal.SIGKILL)
        for r in self.ranks:
            for t in r.threads:
                t.join(timeout=2.0)

    def _report_failure(self, failed, node_rank):
        """Prints the failure with the rank's last stderr lines; returns (exit code, one line
        naming it)."""
        code = failed.proc.returncode
        if code < 0:
            how = f"was killed by {_signal_name(-code)}"
            exit_code = 1
        else:
            how = f"exited with code {code}"
            exit_code = code
        others = sum(1 for r in self.ranks if r is not failed and r.proc.poll() is None)
        # Its leftover children could hold its pipes open; then let the readers drain them.
        _killpg(failed.proc.pid, signal.SIGKILL)
        for t in failed.threads:
            t.join(timeout=2.0)
        lines = list(failed.stderr_tail)
        msg = (f"rank {failed.rank} (pid {failed.proc.pid}) {how}; stopping the other "
               f"{others} process(es).")
        msg += " Last lines of its stderr:" if lines else " It wrote nothing to stderr."
        text = f"{PROG}: {msg}\n" + "".join(f"    {l}\n" for l in lines)
        self.out.write(self.stderr, text.encode("utf-8", "replace"))
        return exit_code, f"rank {failed.rank} (node {node_rank}) {how}"

    # -- one start of the worker group ---------------------------------------------------
    def _run_group(self, node_rank, nnodes, restart, rdzv):
        """Runs the ranks until they end. Returns ("done",), ("signal", signum),
        ("failed", exit code, why) or ("lost", why)."""
        self.ranks = []
        try:
            if not self._start(node_rank, nnodes, restart):
                self._stop_all(signal.SIGTERM)
                return ("failed", 1, f"node {node_rank} could not start its ranks")
            while True:
                if self.signal_received is not None:
                    sig = self.signal_received
                    self.note(f"received {_signal_name(sig)}; forwarded it to "
                              f"{len(self.ranks)} process(es), waiting for them to exit")
                    # Already forwarded by the handler; wait, then SIGKILL what is left.
                    if not self._wait_all(time.monotonic() + self.args.term_timeout):
                        self.note(f"processes still running after {self.args.term_timeout:g}s: "
                                  "SIGKILL")
                        for r in self.ranks:
                            _killpg(r.proc.pid, signal.SIGKILL)
                    for r in self.ranks:
                        r.proc.wait()
                    if rdzv is not None:
                        rdzv.send(op="failed", round=restart, why=(
                            f"node {node_rank}'s launcher received {_signal_name(sig)}"))
                    return ("signal", sig)
                msg = rdzv.poll() if rdzv is not None else None
                if msg is not None and (msg.get("op") == "lost" or (
                        msg.get("op") == "restart" and msg.get("round") == restart)):
                    self._stop_all(signal.SIGTERM)
                    return ("failed", 1, msg["why"]) if msg["op"] == "restart" else \
                        ("lost", msg["why"])
                failed = None
                running = 0
                for r in self.ranks:
                    code = r.proc.poll()
                    if code is None:
                        running += 1
                    elif code != 0 and failed is None:
                        failed = r
                if failed is not None:
                    exit_code, why = self._report_failure(failed, node_rank)
                    if rdzv is not None:  # the other nodes stop theirs at the same time
                        rdzv.send(op="failed", round=restart, why=why)
                    self._stop_all(signal.SIGTERM)
                    return ("failed", exit_code, why)
                if running == 0:
                    return self._finish(rdzv, restart) if rdzv is not None else ("done",)
                time.sleep(_POLL_S)
        finally:
            try:
                if any(r.proc.poll() is None for r in self.ranks):  # only after an exception
                    self._stop_all(signal.SIGKILL, grace=0)
            finally:
                self._cleanup()

    def _finish(self, rdzv, restart):
        """This node's ranks are done: the job is when every node's are (or restarts when
        another node's failed)."""
        rdzv.send(op="done", round=restart)
        say_at = time.monotonic() + _FINISH_NOTE_S
        while self.signal_received is None:
            msg = rdzv.poll()
            if msg is None:
                if say_at is not None and time.monotonic() > say_at:
                    self.note(f"this node's ranks are done; waiting (for {_FINISH_NOTE_S:g} s "
                              "now) for the other nodes' ranks to end")
                    say_at = None
                time.sleep(_POLL_S)
            elif msg.get("op") == "finished" or msg.get("op") == "lost":
                return ("done",)  # lost after done: node 0 finished and went
            elif msg.get("op") == "restart" and msg.get("round") == restart:
                return ("failed", 1, msg["why"])
        return ("signal", self.signal_received)

    # -- rendezvous of the launchers -----------------------------------------------------
    def _elastic(self):
        """Several nodes that restart together or change number: they need the rendezvous."""
        a = self.args
        return a.nnodes > 1 and (a.max_restarts > 0 or a.min_nnodes != a.nnodes)

    def _connect(self):
        from oneflow.distributed import _rendezvous

        a = self.args
        job = " ".join([os.path.basename(child_command(a)[0])] + child_command(a)[1:])
        if a.node_rank == 0:
            try:
                self.server = _rendezvous.RendezvousServer(
                    a.rdzv_port, a.min_nnodes, a.nnodes, a.join_timeout, job)
            except OSError as e:
                raise _rendezvous.RendezvousError(
                    f"node 0 cannot serve the launchers' rendezvous on port {a.rdzv_port} "
                    f"(--rdzv_port): {e}") from None
        return _rendezvous.RendezvousClient(
            a.master_addr, a.rdzv_port, a.node_rank, job, a.nproc_per_node, a.join_timeout,
            should_stop=lambda: self.signal_received is not None)

    def _world(self, rdzv, restart):
        """(node_rank, nnodes, restart) of this start (restart None: the first start of this
        launcher, which may join a job that already restarted); None when a signal came first."""
        if rdzv is None:
            return self.args.node_rank, self.args.nnodes, restart or 0
        msg = rdzv.join(restart, self.args.join_timeout,
                        should_stop=lambda: self.signal_received is not None)
        if msg is None:
            return None
        return msg["node_rank"], len(msg["nodes"]), msg["round"]

    def run(self):
        from oneflow.distributed._rendezvous import RendezvousError

        old_handlers = self._install_handlers()
        a = self.args
        rdzv = None
        try:
            if self._elastic():
                rdzv = self._connect()
            restart, world, why = None, None, None
            while True:
                before = world
                try:
                    world = self._world(rdzv, restart)
                except RendezvousError as e:
                    self.note(f"cannot restart after {why}: {e}" if why else str(e))
                    return 1
                if world is None:
                    return 128 + int(self.signal_received)
                node_rank, nnodes, restart = world
                now = _world_text(node_rank, nnodes, a.nproc_per_node)
                if why is not None:
                    was = f" (was {_world_text(*before[:2], a.nproc_per_node)})" \
                        if before[1] != nnodes else ""
                    self.note(f"restart {restart} of {a.max_restarts} after {why}: new world "
                              f"{now}{was}")
                elif restart:
                    self.note(f"joined the job at its restart {restart} of {a.max_restarts}: "
                              f"new world {now}")
                outcome = self._run_group(node_rank, nnodes, restart, rdzv)
                if outcome[0] == "done":
                    return 0
                if outcome[0] == "signal":
                    return 128 + int(outcome[1])
                if outcome[0] == "lost":
                    self.note(outcome[1])
                    return 1
                _, exit_code, why = outcome
                if restart >= a.max_restarts:
                    if a.max_restarts:
                        self.note(f"{why}; no restart left (--max_restarts {a.max_restarts} "
                                  f"used up): exiting with code {exit_code}")
                    return exit_code
                restart += 1
        except RendezvousError as e:
            self.note(str(e))
            return 1
        finally:
            if rdzv is not None:
                rdzv.close()
            if self.server is not None:
                self.server.close()
            for s, h in old_handlers.items():
                try:
                    signal.signal(s, h)
                except (ValueError, OSError, TypeError):
                    pass


def _world_text(node_rank, nnodes, nproc):
    return f"{nnodes} node(s) x {nproc} = {nnodes * nproc} rank(s), this node {node_rank}"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parse_args(argv)
    except UsageError as e:
        sys.stderr.write(f"{PROG}: error: {e} (see --help)\n")
        return 2
    return Launcher(args).run()


if __name__ == "__main__":
    sys.exit(main())
