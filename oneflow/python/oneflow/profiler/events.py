"""The profiler's results: recorded events with their nesting, per-name averages and the
table that prints them (OneFlow's and PyTorch's columns).

    events = EventList.from_records(_C._profiler_stop())
    print(events.key_averages(group_by_input_shape=True).table(sort_by="cpu_time_total"))

Times are microseconds (floats), as in torch.profiler. An event's self time is its time minus
the time of the events directly nested in it on the same thread, so the self times of one
thread add up to the time its outermost events cover.
"""

# The columns table() can sort by, and the attribute each reads.
_SORT_KEYS = (
    "cpu_time_total",
    "self_cpu_time_total",
    "cpu_time",
    "cuda_time_total",
    "self_cuda_time_total",
    "cuda_time",
    "count",
    "cpu_memory_usage",
    "self_cpu_memory_usage",
    "cuda_memory_usage",
    "self_cuda_memory_usage",
    "bytes",
)


class FunctionEvent:
    """One recorded range: an op call, a backward node, a boxing step, a collective, a step of
    an nn.Graph replay, or a range Python opened (record_function, ProfilerStep#N)."""

    __slots__ = (
        "id", "kind", "name", "start_ns", "end_ns", "thread", "input_shapes", "detail",
        "bytes", "cpu_memory_usage", "cuda_memory_usage", "device", "device_start_ns",
        "device_end_ns", "stack", "parent", "children",
    )

    def __init__(self, id, record):
        (self.kind, self.name, self.start_ns, self.end_ns, self.thread, self.input_shapes,
         self.detail, self.bytes, self.cpu_memory_usage, self.cuda_memory_usage, self.device,
         self.device_start_ns, self.device_end_ns, stack) = record
        # with_stack: "file(line): function" frames of the Python call, innermost first.
        self.stack = stack.split("\n") if stack else []
        self.id = id
        self.parent = None
        self.children = []

    @property
    def key(self):
        return self.name

    @property
    def is_backward(self):
        return self.kind == "backward"

    @property
    def cpu_time_total(self):
        return (self.end_ns - self.start_ns) / 1e3

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.children)

    @property
    def cuda_time_total(self):
        if self.device < 0 or self.device_start_ns < 0 or self.device_end_ns < 0:
            return 0.0
        return (self.device_end_ns - self.device_start_ns) / 1e3

    @property
    def self_cuda_time_total(self):
        # An op's device time is its kernels' (nested op calls mark the same stream inside it).
        return max(0.0, self.cuda_time_total - sum(c.cuda_time_total for c in self.children))

    @property
    def self_cpu_memory_usage(self):
        return self.cpu_memory_usage - sum(c.cpu_memory_usage for c in self.children)

    @property
    def self_cuda_memory_usage(self):
        return self.cuda_memory_usage - sum(c.cuda_memory_usage for c in self.children)

    def __repr__(self):
        return (f"<FunctionEvent {self.kind} {self.name!r} cpu_time_total={self.cpu_time_total:.3f}us "
                f"thread={self.thread}>")


class FunctionEventAvg:
    """The events of one key (name, and input shapes with group_by_input_shape) added up."""

    def __init__(self, key, input_shapes="", stack=()):
        self.key = key
        self.input_shapes = input_shapes
        self.stack = list(stack)
        self.kind = None
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.cuda_time_total = 0.0
        self.self_cuda_time_total = 0.0
        self.cpu_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.cuda_memory_usage = 0
        self.self_cuda_memory_usage = 0
        self.bytes = -1
        self.is_backward = False

    def add(self, e):
        self.kind = self.kind or e.kind
        self.is_backward |= e.is_backward
        self.count += 1
        self.cpu_time_total += e.cpu_time_total
        self.self_cpu_time_total += e.self_cpu_time_total
        self.cuda_time_total += e.cuda_time_total
        self.self_cuda_time_total += e.self_cuda_time_total
        self.cpu_memory_usage += e.cpu_memory_usage
        self.self_cpu_memory_usage += e.self_cpu_memory_usage
        self.cuda_memory_usage += e.cuda_memory_usage
        self.self_cuda_memory_usage += e.self_cuda_memory_usage
        if e.bytes >= 0:
            self.bytes = max(self.bytes, 0) + e.bytes
        return self

    @property
    def cpu_time(self):
        return self.cpu_time_total / max(self.count, 1)

    @property
    def cuda_time(self):
        return self.cuda_time_total / max(self.count, 1)

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key!r} count={self.count} "
                f"cpu_time_total={self.cpu_time_total:.3f}us>")


def _nest(events):
    """Links each event to the innermost event of its thread that encloses it."""
    by_thread = {}
    for e in events:
        by_thread.setdefault(e.thread, []).append(e)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e.start_ns, -e.end_ns, e.id))
        stack = []
        for e in evs:
            while stack and stack[-1].end_ns <= e.start_ns:
                stack.pop()
            # A range that closes after its enclosing one (a Python range left open) is not
            # nested in it: drop enclosing candidates it outlives.
            while stack and e.end_ns > stack[-1].end_ns:
                stack.pop()
            if stack:
                e.parent = stack[-1]
                stack[-1].children.append(e)
            stack.append(e)


def _format_time(us):
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _format_memory(nbytes):
    sign, n = ("-" if nbytes < 0 else ""), abs(nbytes)
    for unit, size in (("Gb", 1 << 30), ("Mb", 1 << 20), ("Kb", 1 << 10)):
        if n >= size:
            return f"{sign}{n / size:.2f} {unit}"
    return f"{sign}{n} b"


def _format_bytes(nbytes):
    return "" if nbytes < 0 else _format_memory(nbytes)


class EventList(list):
    """A list of FunctionEvent (from the profiler) or FunctionEventAvg (from key_averages)."""

    def __init__(self, events=(), profile_memory=False, has_cuda=False):
        super().__init__(events)
        self._profile_memory = profile_memory
        self._has_cuda = has_cuda

    @classmethod
    def from_records(cls, records, profile_memory=False, has_cuda=False):
        events = [FunctionEvent(i, r) for i, r in enumerate(records)]
        _nest(events)
        return cls(events, profile_memory, has_cuda)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        if not isinstance(group_by_stack_n, int) or group_by_stack_n < 0:
            raise ValueError(f"key_averages: group_by_stack_n must be an integer >= 0, got "
                             f"{group_by_stack_n!r}")
        groups = {}
        for e in self:
            shapes = e.input_shapes if group_by_input_shape else ""
            stack = tuple(e.stack[:group_by_stack_n]) if group_by_stack_n else ()
            k = (e.name, shapes, stack)
            if k not in groups:
                groups[k] = FunctionEventAvg(e.name, shapes, stack)
            groups[k].add(e)
        out = EventList(groups.values(), self._profile_memory, self._has_cuda)
        out._group_by_input_shape = group_by_input_shape
        out._group_by_stack_n = group_by_stack_n
        return out

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def total_average(self):
        total = FunctionEventAvg("Total")
        for e in self:
            total.count += e.count if isinstance(e, FunctionEventAvg) else 1
            total.cpu_time_total += e.cpu_time_total
            total.self_cpu_time_total += e.self_cpu_time_total
            total.cuda_time_total += e.cuda_time_total
            total.self_cuda_time_total += e.self_cuda_time_total
        return total

    def table(self, sort_by=None, row_limit=100, max_name_column_width=55, header=None,
              top_level_events_only=False):
        """The rows as text, PyTorch's layout: self and total CPU time (and CUDA time when
        recorded), memory with profile_memory, calls, input shapes when grouped by them, and the
        bytes that boxing steps and collectives moved."""
        if sort_by is not None and sort_by not in _SORT_KEYS:
            raise ValueError(f"table: cannot sort by {sort_by!r}; expected one of "
                             f"{', '.join(_SORT_KEYS)}")
        rows = list(self)
        if top_level_events_only:
            rows = [e for e in rows if getattr(e, "parent", None) is None]
        if rows and isinstance(rows[0], FunctionEvent):
            rows = list(EventList(rows).key_averages())
        if sort_by is not None:
            rows.sort(key=lambda e: getattr(e, sort_by), reverse=True)
        self_cpu_total = sum(e.self_cpu_time_total for e in rows)
        self_cuda_total = sum(e.self_cuda_time_total for e in rows)
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        show_shapes = getattr(self, "_group_by_input_shape", False)
        show_bytes = any(e.bytes >= 0 for e in rows)

        def pct(v, total):
            return f"{100.0 * v / total:.2f}%" if total > 0 else "0.00%"

        columns = [
            ("Name", lambda e: e.key if len(e.key) <= max_name_column_width
             else e.key[:max_name_column_width - 3] + "..."),
            ("Self CPU %", lambda e: pct(e.self_cpu_time_total, self_cpu_total)),
            ("Self CPU", lambda e: _format_time(e.self_cpu_time_total)),
            ("CPU total %", lambda e: pct(e.cpu_time_total, self_cpu_total)),
            ("CPU total", lambda e: _format_time(e.cpu_time_total)),
            ("CPU time avg", lambda e: _format_time(e.cpu_time)),
        ]
        if self._has_cuda:
            columns += [
                ("Self CUDA", lambda e: _format_time(e.self_cuda_time_total)),
                ("Self CUDA %", lambda e: pct(e.self_cuda_time_total, self_cuda_total)),
                ("CUDA total", lambda e: _format_time(e.cuda_time_total)),
                ("CUDA time avg", lambda e: _format_time(e.cuda_time)),
            ]
        if self._profile_memory:
            columns += [
                ("CPU Mem", lambda e: _format_memory(e.cpu_memory_usage)),
                ("Self CPU Mem", lambda e: _format_memory(e.self_cpu_memory_usage)),
            ]
            if self._has_cuda:
                columns += [
                    ("CUDA Mem", lambda e: _format_memory(e.cuda_memory_usage)),
                    ("Self CUDA Mem", lambda e: _format_memory(e.self_cuda_memory_usage)),
                ]
        columns.append(("# of Calls", lambda e: str(e.count)))
        if show_bytes:
            columns.append(("Bytes", lambda e: _format_bytes(e.bytes)))
        if show_shapes:
            columns.append(("Input Shapes", lambda e: e.input_shapes))
        show_stack = getattr(self, "_group_by_stack_n", 0) > 0
        if show_stack:  # as PyTorch: the first frame in the row, the others on lines below it
            columns.append(("Source Location", lambda e: e.stack[0] if e.stack else ""))
        cells = []
        for e in rows:
            cells.append([f(e) for _, f in columns])
            if show_stack:
                cells += [[""] * (len(columns) - 1) + [frame] for frame in e.stack[1:]]
        widths = [max([len(name)] + [len(c[i]) for c in cells]) for i, (name, _) in
                  enumerate(columns)]

        def line(values):
            left = (0, len(values) - 1) if show_stack else (0,)  # names and frames
            return "  ".join(v.ljust(w) if i in left else v.rjust(w)
                             for i, (v, w) in enumerate(zip(values, widths))).rstrip()

        rule = "-" * (sum(widths) + 2 * (len(widths) - 1))
        out = []
        if header:
            out.append(header)
        out += [rule, line([n for n, _ in columns]), rule]
        out += [line(c) for c in cells]
        out.append(rule)
        out.append(f"Self CPU time total: {_format_time(self_cpu_total)}")
        if self._has_cuda:
            out.append(f"Self CUDA time total: {_format_time(self_cuda_total)}")
        return "\n".join(out) + "\n"

    def __str__(self):
        return self.table()
