"""oneflow.framework.balanced_splitter: how a split(axis) divides an axis among ranks, at
OneFlow's module path. Part k of total elements over n parts has total // n elements, one more
when k < total % n, in rank order (DESIGN.md, Slicing).

    BalancedPartNums(10, 4)   # [3, 3, 2, 2]
    BalancedRanges(10, 4)     # [(0, 3), (3, 6), (6, 8), (8, 10)]
"""

import itertools


def _check(total, parts, op):
    if not isinstance(total, int) or isinstance(total, bool) or total < 0:
        raise ValueError(f"{op}: total must be a non-negative int, got {total!r}")
    if not isinstance(parts, int) or isinstance(parts, bool) or parts < 1:
        raise ValueError(f"{op}: the number of parts must be a positive int, got {parts!r}")


def BalancedPartNums(total, part_size):
    """The element count of each of part_size parts of total elements."""
    _check(total, part_size, "BalancedPartNums")
    base, extra = divmod(total, part_size)
    return [base + 1 if k < extra else base for k in range(part_size)]


def BalancedRanges(total, part_size):
    """(begin, end) of each part, end exclusive."""
    _check(total, part_size, "BalancedRanges")
    ends = list(itertools.accumulate(BalancedPartNums(total, part_size)))
    return list(zip([0] + ends[:-1], ends))
