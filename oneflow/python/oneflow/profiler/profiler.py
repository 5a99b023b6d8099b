"""oneflow.profiler.profile: records what the C++ core runs (op calls, backward nodes, boxing
steps, collectives, nn.Graph replay steps, DataLoader waits) and Python's record_function
ranges, for a table per op (key_averages) and a timeline (export_chrome_trace).

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with record_function("step"):
            loss = model(x).sum(); loss.backward()
    print(prof.key_averages(group_by_input_shape=True).table(sort_by="cpu_time_total"))
    prof.export_chrome_trace("trace.json")

with_stack=True gives each op event the Python stack of its call (``event.stack``, innermost
frame first, oneflow's own files left out): key_averages(group_by_stack_n=N) then tells call
sites apart, and the Chrome trace shows the stack in the event's args ("Call stack").

With a schedule, prof.step() marks step boundaries and on_trace_ready(prof) runs after each
cycle's last active step (tensorboard_trace_handler writes one trace file per rank and cycle;
``python3 -m oneflow.profiler.merge DIR`` puts the ranks' files on one timeline).
"""

import os
import socket
import time
from enum import Enum

import oneflow._oneflow_internal as _C
from oneflow.profiler import chrome_trace
from oneflow._profiler_ranges import range_or_none
from oneflow.profiler.events import EventList


# with_stack: the frames of oneflow's own files are left out of an op's stack, so its first
# frame is the call site in the user's code (PyTorch filters its internals the same way).
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class ProfilerActivity(Enum):
    CPU = 1
    CUDA = 2


class ProfilerAction(Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def _cuda_unavailable():
    """Why CUDA device times cannot be recorded here ("" when they can)."""
    return _C.cuda_unavailable()


def supported_activities():
    activities = {ProfilerActivity.CPU}
    if not _cuda_unavailable():
        activities.add(ProfilerActivity.CUDA)
    return activities


def schedule(*, wait, warmup, active, repeat=0, skip_first=0):
    """PyTorch's schedule: after skip_first steps, cycles of `wait` idle steps, `warmup` steps
    recorded and dropped, `active` recorded steps (on_trace_ready after the last), `repeat`
    cycles (0: until the profiler exits)."""
    for name, v, least in (("wait", wait, 0), ("warmup", warmup, 0), ("active", active, 1),
                           ("repeat", repeat, 0), ("skip_first", skip_first, 0)):
        if not isinstance(v, int) or v < least:
            raise ValueError(f"schedule: {name} must be an integer >= {least}, got {v!r}")

    def schedule_fn(step):
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        mod = step % cycle
        if mod < wait:
            return ProfilerAction.NONE
        if mod < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return schedule_fn


def _always_record(step):
    return ProfilerAction.RECORD


def _rank_info():
    info = _C.world_info()
    return info["rank"], info["world_size"]


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """An on_trace_ready that writes ``dir_name/<worker>.<ms>.pt.trace.json[.gz]`` (the file
    names TensorBoard's profiler plugin and ``oneflow.profiler.merge`` read); the worker name
    defaults to ``rank<r>_<host>_<pid>``."""

    def handler(prof):
        os.makedirs(dir_name, exist_ok=True)
        name = worker_name
        if name is None:
            name = f"rank{_rank_info()[0]}_{socket.gethostname()}_{os.getpid()}"
        path = os.path.join(dir_name, f"{name}.{time.time_ns() // 1_000_000}.pt.trace.json")
        prof.export_chrome_trace(path + (".gz" if use_gzip else ""))

    return handler


class profile:
    """See the module's docstring. Arguments this profiler cannot honour are refused."""

    def __init__(self, activities=None, *, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, use_cuda=None):
        for name, value in (("with_flops", with_flops), ("with_modules", with_modules)):
            if value:
                raise ValueError(f"profile: {name}=True is not supported (events record no "
                                 f"{name[5:]}); leave it False")
        if experimental_config is not None:
            raise ValueError("profile: experimental_config is not supported; leave it None")
        # As OneFlow and PyTorch: by default every activity this machine supports.
        activities = set(activities) if activities is not None else supported_activities()
        if use_cuda:
            activities.add(ProfilerActivity.CUDA)
        for a in activities:
            if not isinstance(a, ProfilerActivity):
                raise TypeError(f"profile: activities must be ProfilerActivity values, got {a!r}")
        if ProfilerActivity.CPU not in activities:
            raise ValueError("profile: activities without ProfilerActivity.CPU are not supported "
                             "(device times are attached to the CPU-side op events)")
        if ProfilerActivity.CUDA in activities and _cuda_unavailable():
            raise ValueError(f"profile: ProfilerActivity.CUDA needs a CUDA device "
                             f"({_cuda_unavailable()}); profile ProfilerActivity.CPU only")
        if schedule is not None and not callable(schedule):
            raise TypeError(f"profile: schedule must be callable (oneflow.profiler.schedule), "
                            f"got {type(schedule).__name__}")
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise TypeError(f"profile: on_trace_ready must be callable, got "
                            f"{type(on_trace_ready).__name__}")
        self.activities = activities
        self.record_shapes = bool(record_shapes)
        self.profile_memory = bool(profile_memory)
        self.with_stack = bool(with_stack)
        self.schedule = schedule or _always_record
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self._action = ProfilerAction.NONE
        self._recording = False
        self._step_range = None
        self._events = None
        self._clock = (0, 0)

    # Recording on and off, with the C++ recorder.
    def _start_recording(self):
        _C._profiler_start(record_shapes=self.record_shapes, profile_memory=self.profile_memory,
                           cuda=ProfilerActivity.CUDA in self.activities,
                           with_stack=self.with_stack, stack_skip=_PACKAGE_DIR)
        self._recording = True

    def _stop_recording(self, keep):
        self._end_step_range()
        records = _C._profiler_stop()
        self._recording = False
        if keep:
            self._clock = tuple(_C._profiler_clock_offset_ns(8))
            self._events = EventList.from_records(
                records, profile_memory=self.profile_memory,
                has_cuda=ProfilerActivity.CUDA in self.activities)

    def _begin_step_range(self):
        # As PyTorch: ProfilerStep#N ranges only under a schedule (whose steps they are).
        if self._recording and self._step_range is None and self.schedule is not _always_record:
            self._step_range = _C._ProfilerRange(f"ProfilerStep#{self.step_num}")

    def _end_step_range(self):
        if self._step_range is not None:
            self._step_range.end()
            self._step_range = None

    def _enter_action(self, new):
        """Moves from the current action to `new` (PyTorch's profiler state machine)."""
        old = self._action
        self._end_step_range()
        if old in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE, ProfilerAction.WARMUP):
            if old == ProfilerAction.RECORD_AND_SAVE or new == ProfilerAction.NONE or (
                    old == ProfilerAction.WARMUP and new != ProfilerAction.WARMUP):
                keep = old != ProfilerAction.WARMUP
                self._stop_recording(keep)
                if old == ProfilerAction.RECORD_AND_SAVE and self.on_trace_ready:
                    self.on_trace_ready(self)
        if new != ProfilerAction.NONE and not self._recording:
            self._start_recording()
        self._action = new
        self._begin_step_range()

    def start(self):
        self.step_num = 0
        self._enter_action(self.schedule(0))

    def stop(self):
        if self._recording:
            save = self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
            self._stop_recording(keep=save)
            if save and self.on_trace_ready:
                self.on_trace_ready(self)
        self._action = ProfilerAction.NONE

    def step(self):
        """Marks the end of a training step (ProfilerStep#N ranges; the schedule's clock)."""
        self.step_num += 1
        self._enter_action(self.schedule(self.step_num))

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def _results(self, what):
        if self._events is None:
            raise RuntimeError(f"profile.{what}: no results yet (the profiler has not finished "
                               f"an active step or left its with block)")
        return self._events

    def events(self):
        return self._results("events")

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        """Events added up per name (and input shapes, and the innermost group_by_stack_n frames
        of their Python stacks, which need with_stack=True)."""
        events = self._results("key_averages")
        if group_by_stack_n and not self.with_stack:
            raise ValueError("profile.key_averages: group_by_stack_n needs the Python stacks of "
                             "profile(with_stack=True); this profile recorded none")
        return events.key_averages(group_by_input_shape, group_by_stack_n)

    def export_chrome_trace(self, path):
        """Writes this rank's trace (Chrome trace event JSON; gzipped when path ends in .gz)."""
        events = self._results("export_chrome_trace")
        rank, world_size = _rank_info()
        trace = chrome_trace.to_chrome_trace(events, rank, world_size, self._clock[0],
                                             self._clock[1],
                                             {_C._profiler_thread_id(): "main thread"})
        chrome_trace.write_trace(trace, path)


class record_function:
    """A named range in the profiler's timeline and table, as a context manager or decorator."""

    def __init__(self, name, args=None):
        if args is not None:
            raise ValueError("record_function: args is not supported; put it in the name")
        self.name = str(name)
        self._range = None

    def __enter__(self):
        self._range = range_or_none(self.name)
        return self

    def __exit__(self, *exc):
        if self._range is not None:
            self._range.end()
            self._range = None
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with record_function(self.name):
                return fn(*args, **kwargs)

        return wrapped
