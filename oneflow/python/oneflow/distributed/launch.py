"""Start one process per local rank, torchrun style.

    python3 -m oneflow.distributed.launch [--nproc_per_node N] [--nnodes M] [--node_rank K]
        [--master_addr A] [--master_port P] [--ips H1,H2,...] [--logdir DIR] [--log_dir DIR]
        [--no_python] [-m] script_or_module [args ...]

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

Children run in their own sessions (process groups) with stdin from /dev/null, so a Ctrl-C at
the terminal reaches only the launcher, which forwards SIGINT / SIGTERM / SIGHUP to every
child's process group, waits up to GRACE_PERIOD_S, then SIGKILLs what is left (a second signal
SIGKILLs at once); the launcher then exits with 128 + the signal number.

When a rank exits with a non-zero code (or is killed by a signal) the launcher prints one line
naming it, followed by the last lines of its stderr, sends SIGTERM to the other ranks' process
groups, SIGKILL after GRACE_PERIOD_S, and exits with the rank's exit code (1 when a signal
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
GRACE_PERIOD_S = 5.0
TAIL_LINES = 20
_POLL_S = 0.05
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


def _port(text):
    v = _int_arg("--master_port", text)
    if not 1 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"--master_port {v} is not a port (1..65535)")
    return v


def _build_parser():
    p = _Parser(
        prog=f"python3 -m {PROG}",
        description="Start one process per local rank with torchrun's environment variables.",
        allow_abbrev=False,
    )
    p.add_argument("--nproc_per_node", "--nproc-per-node", type=_positive_int("--nproc_per_node"),
                   default=1, help="processes (ranks) on this node (default 1)")
    p.add_argument("--nnodes", type=_positive_int("--nnodes"), default=None,
                   help="number of nodes (default 1)")
    p.add_argument("--node_rank", "--node-rank", type=_nonneg_int("--node_rank"), default=None,
                   help="this node's index, 0..nnodes-1 (default 0)")
    p.add_argument("--master_addr", "--master-addr", default=None,
                   help="address of the rank 0 node (default 127.0.0.1)")
    p.add_argument("--master_port", "--master-port", type=_port, default=29500,
                   help="port on the rank 0 node (default 29500)")
    p.add_argument("--ips", default=None,
                   help="PaddlePaddle's form: the nodes' hosts, master first (sets --nnodes, "
                        "--node_rank, --master_addr)")
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
        args.nnodes = 1
    if args.node_rank is None:
        args.node_rank = 0
    if args.master_addr is None:
        args.master_addr = "127.0.0.1"
    if args.training_script is None:
        raise UsageError("missing the script to run (a module name with -m, a program with --no_python)")
    if args.node_rank >= args.nnodes:
        raise UsageError(f"--node_rank {args.node_rank} is out of range for --nnodes {args.nnodes}")
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


def child_envs(args, base_env=None):
    """The environments of this node's ranks, in local-rank order."""
    base = dict(os.environ if base_env is None else base_env)
    envs = []
    for r in range(args.nproc_per_node):
        env = dict(base)
        env.update(
            RANK=str(args.node_rank * args.nproc_per_node + r),
            WORLD_SIZE=str(args.nnodes * args.nproc_per_node),
            LOCAL_RANK=str(r),
            LOCAL_WORLD_SIZE=str(args.nproc_per_node),
            GROUP_RANK=str(args.node_rank),
            NODE_RANK=str(args.node_rank),
            MASTER_ADDR=args.master_addr,
            MASTER_PORT=str(args.master_port),
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
    def _start(self):
        args = self.args
        cmd = child_command(args)
        envs = child_envs(args)
        if args.nproc_per_node > 1 and "OMP_NUM_THREADS" not in os.environ:
            self.note("setting OMP_NUM_THREADS=1 for each process (it was unset) to avoid "
                      "overloading the system; set it yourself to tune performance")
        if args.logdir:
            os.makedirs(args.logdir, exist_ok=True)
        preexec = _make_preexec()
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
                    logfile = open(os.path.join(args.logdir, f"{name}_rank{r.rank}.log"), "wb")
                elif args.msrun_log_dir:
                    folder = os.path.join(args.msrun_log_dir, str(args.node_rank), f"rank.{r.rank}")
                    os.makedirs(folder, exist_ok=True)
                    logfile = open(os.path.join(folder, name), "wb")
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

    def _stop_all(self, sig, grace=GRACE_PERIOD_S):
        """Send `sig` to every rank's process group, SIGKILL those left after `grace`."""
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

    def _report_failure(self, failed):
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
        return exit_code

    def run(self):
        old_handlers = self._install_handlers()
        try:
            if not self._start():
                self._stop_all(signal.SIGTERM)
                return 1
            while True:
                if self.signal_received is not None:
                    sig = self.signal_received
                    self.note(f"received {_signal_name(sig)}; forwarded it to "
                              f"{len(self.ranks)} process(es), waiting for them to exit")
                    # Already forwarded by the handler; wait, then SIGKILL what is left.
                    if not self._wait_all(time.monotonic() + GRACE_PERIOD_S):
                        self.note(f"processes still running after {GRACE_PERIOD_S:g}s: SIGKILL")
                        for r in self.ranks:
                            _killpg(r.proc.pid, signal.SIGKILL)
                    for r in self.ranks:
                        r.proc.wait()
                    return 128 + int(sig)
                failed = None
                running = 0
                for r in self.ranks:
                    code = r.proc.poll()
                    if code is None:
                        running += 1
                    elif code != 0 and failed is None:
                        failed = r
                if failed is not None:
                    exit_code = self._report_failure(failed)
                    self._stop_all(signal.SIGTERM)
                    return exit_code
                if running == 0:
                    return 0
                time.sleep(_POLL_S)
        finally:
            try:
                if any(r.proc.poll() is None for r in self.ranks):  # only after an exception
                    self._stop_all(signal.SIGKILL, grace=0)
            finally:
                self._cleanup()
                for s, h in old_handlers.items():
                    try:
                        signal.signal(s, h)
                    except (ValueError, OSError, TypeError):
                        pass


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
