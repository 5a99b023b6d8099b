"""Learning-rate schedulers with PyTorch's semantics: call step() once per epoch (OneCycleLR:
once per batch; ReduceLROnPlateau: step(metric)), after optimizer.step().

    sched = optim.lr_scheduler.StepLR(opt, step_size=30, gamma=0.1)
    for epoch in range(90):
        train(...); sched.step()
    sched.get_last_lr()     # [lr of each param group]
"""

import math
import types
import warnings
from bisect import bisect_right
from collections import Counter

from oneflow.optim.optimizer import Optimizer


def _check_optimizer(name, optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{name}: {type(optimizer).__name__} is not an Optimizer")


class LRScheduler:
    def __init__(self, optimizer, last_epoch=-1, verbose=False):
        _check_optimizer(type(self).__name__, optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming an optimizer"
                    )
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.verbose = verbose
        self._initial_step()

    def _initial_step(self):
        # The first step sets the lr of epoch 0 (last_epoch goes from -1 to 0).
        self._step_count = 0
        self.step()

    def get_lr(self):
        raise NotImplementedError

    def get_last_lr(self):
        return self._last_lr

    def state_dict(self):
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)

    def step(self, epoch=None):
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            warnings.warn(
                "Passing an epoch to scheduler.step() is deprecated; call step() once per epoch",
                UserWarning,
            )
            self.last_epoch = epoch
            values = self._get_closed_form_lr() if hasattr(self, "_get_closed_form_lr") else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
            if self.verbose:
                print(f"Adjusting learning rate of group to {lr:.4e}.")
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]


# PyTorch's older name, still used by many scripts.
_LRScheduler = LRScheduler


class LambdaLR(LRScheduler):
    """lr = initial_lr * lr_lambda(epoch)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1, verbose=False):
        self.optimizer = optimizer
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(
                    f"LambdaLR: expected {len(optimizer.param_groups)} lr_lambdas, got {len(lr_lambda)}"
                )
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        super().__init__(optimizer, last_epoch, verbose)

    def state_dict(self):
        # Functions do not pickle; callable objects keep their attributes (as in PyTorch).
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None] * len(self.lr_lambdas)
        for i, fn in enumerate(self.lr_lambdas):
            if not isinstance(fn, types.FunctionType):
                state["lr_lambdas"][i] = dict(fn.__dict__)
        return state

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        lr_lambdas = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for i, fn_state in enumerate(lr_lambdas):
            if fn_state is not None:
                self.lr_lambdas[i].__dict__.update(fn_state)

    def get_lr(self):
        return [base_lr * fn(self.last_epoch) for fn, base_lr in zip(self.lr_lambdas, self.base_lrs)]


class StepLR(LRScheduler):
    """Multiplies the lr by gamma every step_size epochs."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1, verbose=False):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        # Chainable form: scale the current lr, so other changes to it are kept.
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [self._lr_at(base_lr, self.last_epoch) for base_lr in self.base_lrs]

    def _lr_at(self, base_lr, step):
        return base_lr * self.gamma ** (step // self.step_size)


class MultiStepLR(LRScheduler):
    """Multiplies the lr by gamma at each milestone epoch."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1, verbose=False):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return [group["lr"] for group in self.optimizer.param_groups]
        factor = self.gamma ** self.milestones[self.last_epoch]
        return [group["lr"] * factor for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [self._lr_at(base_lr, self.last_epoch) for base_lr in self.base_lrs]

    def _lr_at(self, base_lr, step):
        return base_lr * self.gamma ** bisect_right(sorted(self.milestones.elements()), step)


class CosineAnnealingLR(LRScheduler):
    """Cosine from the initial lr down to eta_min over T_max epochs (and back up after)."""

    def __init__(self, optimizer, T_max, eta_min=0, last_epoch=-1, verbose=False):
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [group["lr"] for group in groups]
        if self._step_count == 1 and self.last_epoch > 0:
            return self._get_closed_form_lr()
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [
                group["lr"] + (base_lr - self.eta_min) * (1 - math.cos(math.pi / self.T_max)) / 2
                for base_lr, group in zip(self.base_lrs, groups)
            ]
        # Recursive form (PyTorch's): the ratio of consecutive cosine terms.
        return [
            (1 + math.cos(math.pi * self.last_epoch / self.T_max))
            / (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max))
            * (group["lr"] - self.eta_min)
            + self.eta_min
            for group in groups
        ]

    def _get_closed_form_lr(self):
        return [self._lr_at(base_lr, self.last_epoch) for base_lr in self.base_lrs]

    def _lr_at(self, base_lr, step):
        return self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * step / self.T_max)) / 2


class LinearLR(LRScheduler):
    """Scales the initial lr by a factor going linearly from start_factor to end_factor over
    total_iters epochs, then keeps it."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1,
                 verbose=False):
        if not 0 < start_factor <= 1.0:
            raise ValueError(f"LinearLR: start_factor must be in (0, 1], got {start_factor}")
        if not 0 <= end_factor <= 1.0:
            raise ValueError(f"LinearLR: end_factor must be in [0, 1], got {end_factor}")
        if total_iters <= 0:
            raise ValueError(f"LinearLR: total_iters must be positive, got {total_iters}")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in groups]
        if self.last_epoch > self.total_iters:
            return [group["lr"] for group in groups]
        # Chainable form (PyTorch's): the ratio of this epoch's factor to the previous one.
        delta = self.end_factor - self.start_factor
        ratio = 1.0 + delta / (self.total_iters * self.start_factor + (self.last_epoch - 1) * delta)
        return [group["lr"] * ratio for group in groups]

    def _get_closed_form_lr(self):
        return [self._lr_at(base_lr, self.last_epoch) for base_lr in self.base_lrs]

    def _lr_at(self, base_lr, step):
        progress = min(self.total_iters, step) / self.total_iters
        return base_lr * (self.start_factor + (self.end_factor - self.start_factor) * progress)


class SequentialLR(LRScheduler):
    """Runs schedulers one after the other: schedulers[i] from epoch milestones[i - 1] on, each
    restarting from its own epoch 0 at its milestone."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1, verbose=False):
        _check_optimizer("SequentialLR", optimizer)
        schedulers, milestones = list(schedulers), list(milestones)
        if len(schedulers) == 0:
            raise ValueError("SequentialLR: expected at least one scheduler, got none")
        for i, scheduler in enumerate(schedulers):
            if getattr(scheduler, "optimizer", None) is not optimizer:
                raise ValueError(
                    f"SequentialLR: scheduler {i} ({type(scheduler).__name__}) belongs to another "
                    "optimizer; all schedulers must drive the optimizer passed in"
                )
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                f"SequentialLR: {len(schedulers)} schedulers need {len(schedulers) - 1} milestones, "
                f"got {len(milestones)}"
            )
        if milestones != sorted(milestones):
            raise ValueError(f"SequentialLR: milestones must be increasing, got {milestones}")
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        self.verbose = verbose
        # Each scheduler's constructor stepped once: start again from the initial lr and undo
        # those steps, then let only the first scheduler take its initial step.
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        for scheduler in schedulers:
            scheduler.last_epoch -= 1
        schedulers[0]._initial_step()
        self._last_lr = schedulers[0].get_last_lr()

    def step(self):
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            # The next scheduler starts at its epoch 0 (the closed form, without the warning an
            # explicit epoch gives: the user passed none).
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                scheduler.step(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        schedulers = state_dict.pop("_schedulers")
        if len(schedulers) != len(self._schedulers):
            raise ValueError(
                f"SequentialLR.load_state_dict: the state dict has {len(schedulers)} schedulers, "
                f"this SequentialLR has {len(self._schedulers)}"
            )
        self.__dict__.update(state_dict)
        for scheduler, state in zip(self._schedulers, schedulers):
            scheduler.load_state_dict(state)


class OneCycleLR(LRScheduler):
    """The 1cycle policy, stepped once per batch: the lr goes from max_lr / div_factor up to
    max_lr over pct_start of total_steps, then down to initial_lr / final_div_factor (with
    three_phase, back to the initial lr first, then down). Momentum (or Adam's beta1) cycles
    inversely between max_momentum and base_momentum."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95,
                 div_factor=25.0, final_div_factor=1e4, three_phase=False, last_epoch=-1, verbose=False):
        _check_optimizer("OneCycleLR", optimizer)
        self.optimizer = optimizer

        def positive_int(name, value):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"OneCycleLR: {name} must be a positive integer, got {value!r}")

        if total_steps is not None:
            positive_int("total_steps", total_steps)
            self.total_steps = total_steps
        elif epochs is None or steps_per_epoch is None:
            raise ValueError("OneCycleLR: give total_steps, or both epochs and steps_per_epoch "
                             f"(got epochs={epochs}, steps_per_epoch={steps_per_epoch})")
        else:
            positive_int("epochs", epochs)
            positive_int("steps_per_epoch", steps_per_epoch)
            self.total_steps = epochs * steps_per_epoch
        if isinstance(pct_start, bool) or not isinstance(pct_start, (int, float)) or not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: pct_start must be a number in [0, 1], got {pct_start!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        self.anneal_strategy = anneal_strategy
        pct_start = float(pct_start)
        if three_phase:
            self._schedule_phases = [
                dict(end_step=pct_start * self.total_steps - 1, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=2 * pct_start * self.total_steps - 2, start_lr="max_lr", end_lr="initial_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum"),
                dict(end_step=self.total_steps - 1, start_lr="initial_lr", end_lr="min_lr",
                     start_momentum="max_momentum", end_momentum="max_momentum"),
            ]
        else:
            self._schedule_phases = [
                dict(end_step=pct_start * self.total_steps - 1, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=self.total_steps - 1, start_lr="max_lr", end_lr="min_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum"),
            ]

        max_lrs = self._format_param("max_lr", max_lr)
        if last_epoch == -1:
            for m, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = m / div_factor
                group["max_lr"] = m
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(
                    f"OneCycleLR: cycle_momentum needs an optimizer with momentum or betas; "
                    f"{type(optimizer).__name__} has neither (pass cycle_momentum=False)"
                )
            self.use_beta1 = "betas" in optimizer.defaults
            max_momentums = self._format_param("max_momentum", max_momentum)
            base_momentums = self._format_param("base_momentum", base_momentum)
            if last_epoch == -1:
                for m, b, group in zip(max_momentums, base_momentums, optimizer.param_groups):
                    if self.use_beta1:
                        group["betas"] = (m, *group["betas"][1:])
                    else:
                        group["momentum"] = m
                    group["max_momentum"] = m
                    group["base_momentum"] = b
        super().__init__(optimizer, last_epoch, verbose)

    def _format_param(self, name, param):
        groups = self.optimizer.param_groups
        if isinstance(param, (list, tuple)):
            if len(param) != len(groups):
                raise ValueError(f"OneCycleLR: expected {len(groups)} values for {name}, got {len(param)}")
            return list(param)
        return [param] * len(groups)

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ValueError(
                f"OneCycleLR: tried to step {step_num + 1} times, but total_steps is {self.total_steps}"
            )
        lrs = []
        for group in self.optimizer.param_groups:
            start_step = 0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step_num <= end_step or i == len(self._schedule_phases) - 1:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lr = self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        momentum = self._anneal(group[phase["start_momentum"]], group[phase["end_momentum"]], pct)
                    break
                start_step = phase["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                if self.use_beta1:
                    group["betas"] = (momentum, *group["betas"][1:])
                else:
                    group["momentum"] = momentum
        return lrs


class ReduceLROnPlateau:
    """Multiplies the lr by factor when a metric passed to step(metric) has not improved for
    more than patience epochs (improved: below best * (1 - threshold) in mode "min" with
    threshold_mode "rel", below best - threshold with "abs"; mirrored in mode "max"); after a
    reduction waits cooldown epochs; never goes below min_lr."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0, eps=1e-8, verbose=False):
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be < 1.0, got {factor}")
        _check_optimizer("ReduceLROnPlateau", optimizer)
        self.factor = factor
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(
                    f"ReduceLROnPlateau: expected {len(optimizer.param_groups)} min_lrs, got {len(min_lr)}"
                )
            self.min_lrs = list(min_lr)
        else:
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.verbose = verbose
        self.cooldown = cooldown
        self.cooldown_counter = 0
        self.eps = eps
        self.last_epoch = 0
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()
        self._last_lr = [group["lr"] for group in optimizer.param_groups]

    def _init_is_better(self, mode, threshold, threshold_mode):
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', got {threshold_mode!r}")
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode
        self.mode_worse = math.inf if mode == "min" else -math.inf

    def _reset(self):
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def is_better(self, a, best):
        if self.mode == "min":
            return a < (best * (1.0 - self.threshold) if self.threshold_mode == "rel" else best - self.threshold)
        return a > (best * (1.0 + self.threshold) if self.threshold_mode == "rel" else best + self.threshold)

    def get_last_lr(self):
        return self._last_lr

    def step(self, metrics, epoch=None):
        current = float(metrics)  # a 0-dim tensor too
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(
                "Passing an epoch to scheduler.step() is deprecated; call step() once per epoch",
                UserWarning,
            )
        self.last_epoch = epoch
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr(epoch)
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _reduce_lr(self, epoch):
        for i, group in enumerate(self.optimizer.param_groups):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, self.min_lrs[i])
            if old_lr - new_lr > self.eps:  # smaller changes are not worth making
                group["lr"] = new_lr
                if self.verbose:
                    print(f"Epoch {epoch}: reducing learning rate of group {i} to {new_lr:.4e}.")

    def state_dict(self):
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)


# ---------------------------------------------------------------- OneFlow's closed-form schedulers
# OneFlow computes each lr from the initial one and the step: lr = f(initial_lr, step). OneFlow
# names the counter last_step (PyTorch: last_epoch); both are accepted.


class _ClosedFormLR(LRScheduler):
    def __init__(self, optimizer, last_step=-1, verbose=False, last_epoch=None):
        super().__init__(optimizer, last_step if last_epoch is None else last_epoch, verbose)

    @property
    def last_step(self):
        return self.last_epoch

    def get_lr(self):
        return [self._lr_at(base_lr, self.last_epoch) for base_lr in self.base_lrs]

    _get_closed_form_lr = get_lr

    def _lr_at(self, base_lr, step):
        raise NotImplementedError


class ExponentialLR(_ClosedFormLR):
    """lr = initial_lr * gamma ** step."""

    def __init__(self, optimizer, gamma, last_step=-1, verbose=False, last_epoch=None):
        if gamma <= 0.0:
            raise ValueError(f"ExponentialLR: gamma must be > 0, got {gamma}")
        self.gamma = gamma
        super().__init__(optimizer, last_step, verbose, last_epoch)

    def _lr_at(self, base_lr, step):
        return base_lr * self.gamma ** step


class ConstantLR(_ClosedFormLR):
    """lr = initial_lr * factor for the first total_iters steps, then initial_lr."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_step=-1, verbose=False, last_epoch=None):
        if not 0 <= factor <= 1.0:
            raise ValueError(f"ConstantLR: factor must be in [0, 1], got {factor}")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_step, verbose, last_epoch)

    def _lr_at(self, base_lr, step):
        return base_lr * self.factor if step < self.total_iters else base_lr


class CosineDecayLR(_ClosedFormLR):
    """lr = initial_lr * ((1 - alpha) * (1 + cos(pi * step / decay_steps)) / 2 + alpha) for
    step < decay_steps, then initial_lr * alpha."""

    def __init__(self, optimizer, decay_steps, alpha=0.0, last_step=-1, verbose=False, last_epoch=None):
        if decay_steps <= 0:
            raise ValueError(f"CosineDecayLR: decay_steps must be > 0, got {decay_steps}")
        self.decay_steps, self.alpha = decay_steps, alpha
        super().__init__(optimizer, last_step, verbose, last_epoch)

    def _lr_at(self, base_lr, step):
        if step >= self.decay_steps:
            return base_lr * self.alpha
        cos_decay = 0.5 * (1 + math.cos(math.pi * step / self.decay_steps))
        return base_lr * ((1 - self.alpha) * cos_decay + self.alpha)


class PolynomialLR(_ClosedFormLR):
    """lr = (initial_lr - end_learning_rate) * (1 - step / decay_batch) ** power +
    end_learning_rate (step capped at decay_batch; with cycle the horizon grows by decay_batch)."""

    def __init__(self, optimizer, decay_batch, end_learning_rate=0.0001, power=1.0, cycle=False, last_step=-1,
                 verbose=False, last_epoch=None):
        if decay_batch <= 0:
            raise ValueError(f"PolynomialLR: decay_batch must be > 0, got {decay_batch}")
        self.decay_batch, self.end_learning_rate = decay_batch, end_learning_rate
        self.power, self.cycle = power, cycle
        super().__init__(optimizer, last_step, verbose, last_epoch)

    def _lr_at(self, base_lr, step):
        horizon = self.decay_batch
        if self.cycle:
            step = max(step, 1)
            horizon = horizon * math.ceil(step / horizon)
        else:
            step = min(step, horizon)
        factor = (1 - step / horizon) ** self.power
        return (base_lr - self.end_learning_rate) * factor + self.end_learning_rate


class CosineAnnealingWarmRestarts(_ClosedFormLR):
    """Cosine from initial_lr * decay_rate ** cycle down to eta_min over cycles of T_0, T_0 *
    T_mult, ... steps (OneFlow's; decay_rate=1 is PyTorch's); after restart_limit cycles (0: no
    limit) the lr stays at eta_min."""

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, decay_rate=1.0, restart_limit=0, last_step=-1,
                 verbose=False, last_epoch=None):
        if not isinstance(T_0, int) or T_0 <= 0:
            raise ValueError(f"CosineAnnealingWarmRestarts: T_0 must be a positive int, got {T_0!r}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(f"CosineAnnealingWarmRestarts: T_mult must be an int >= 1, got {T_mult!r}")
        self.T_0, self.T_mult, self.eta_min = T_0, T_mult, eta_min
        self.decay_rate, self.restart_limit = decay_rate, restart_limit
        super().__init__(optimizer, last_step, verbose, last_epoch)

    def _lr_at(self, base_lr, step):
        if self.T_mult > 1:
            cycle = math.floor(math.log(1 - step / self.T_0 * (1 - self.T_mult), self.T_mult))
            length = self.T_mult ** cycle * self.T_0
            into = step - (1 - self.T_mult ** cycle) / (1 - self.T_mult) * self.T_0
        else:
            cycle, length = step // self.T_0, self.T_0
            into = step - length * cycle
        if self.restart_limit > 0 and cycle >= self.restart_limit:
            return self.eta_min
        cos_decay = 0.5 * (1 + math.cos(math.pi * into / length))
        return self.eta_min + (base_lr * self.decay_rate ** cycle - self.eta_min) * cos_decay


class WarmupLR(_ClosedFormLR):
    """OneFlow's warmup before a scheduler (or before the initial lr when given an optimizer):
    for step < warmup_iters, "linear" goes from initial_lr * warmup_factor to the scheduler's lr
    at warmup_iters (to initial_lr with warmup_prefix), "constant" holds initial_lr *
    warmup_factor; afterwards the scheduler's lr at step (at step - warmup_iters with
    warmup_prefix). The scheduler must have a closed form (StepLR, MultiStepLR,
    CosineAnnealingLR, LinearLR and OneFlow's schedulers above)."""

    def __init__(self, scheduler_or_optimizer, warmup_factor=1.0 / 3, warmup_iters=5, warmup_method="linear",
                 warmup_prefix=False, last_step=-1, verbose=False, last_epoch=None):
        if isinstance(scheduler_or_optimizer, Optimizer):
            optimizer, inner = scheduler_or_optimizer, None
            if warmup_iters == 0:
                raise ValueError("WarmupLR: warmup_iters must be > 0 when given an optimizer")
        elif isinstance(scheduler_or_optimizer, LRScheduler):
            optimizer, inner = scheduler_or_optimizer.optimizer, scheduler_or_optimizer
            if not hasattr(inner, "_lr_at"):
                raise ValueError(f"WarmupLR: {type(inner).__name__} has no closed form (lr as a function "
                                 f"of the step); warm up StepLR, MultiStepLR, CosineAnnealingLR, LinearLR "
                                 f"or OneFlow's schedulers")
        else:
            raise TypeError(f"WarmupLR: expected an LRScheduler or an Optimizer, got "
                            f"{type(scheduler_or_optimizer).__name__}")
        if warmup_method not in ("linear", "constant"):
            raise ValueError(f"WarmupLR: warmup_method must be 'linear' or 'constant', got {warmup_method!r}")
        self.inner = inner
        self.warmup_factor, self.warmup_iters = warmup_factor, warmup_iters
        self.warmup_method, self.warmup_prefix = warmup_method, warmup_prefix
        if inner is not None:  # the scheduler's constructor set its own lr: start from the initial one
            for group in optimizer.param_groups:
                group["lr"] = group["initial_lr"]
        super().__init__(optimizer, last_step, verbose, last_epoch)

    def _after(self, base_lr, step):
        return base_lr if self.inner is None else self.inner._lr_at(base_lr, step)

    def _lr_at(self, base_lr, step):
        if step >= self.warmup_iters:
            return self._after(base_lr, step - self.warmup_iters if self.warmup_prefix else step)
        if self.warmup_method == "constant":
            return base_lr * self.warmup_factor
        end = base_lr if self.warmup_prefix else self._after(base_lr, self.warmup_iters)
        start = base_lr * self.warmup_factor
        return start + (end - start) * step / self.warmup_iters

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "inner")}
        state["inner"] = None if self.inner is None else self.inner.state_dict()
        return state

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        inner = state_dict.pop("inner")
        self.__dict__.update(state_dict)
        if inner is not None:
            self.inner.load_state_dict(inner)


WarmUpLR = WarmupLR  # OneFlow's older name, which it keeps as an alias


class ChainedScheduler(_ClosedFormLR):
    """OneFlow's chain: at each step the lr is the schedulers' closed forms applied in turn,
    lr = s_n(... s_1(initial_lr, step) ..., step) (ConstantLR then ExponentialLR:
    initial_lr * factor * gamma ** step while step < total_iters). Each scheduler must have a
    closed form (as WarmupLR's); all must drive one optimizer."""

    def __init__(self, schedulers):
        if not isinstance(schedulers, (list, tuple)) or not schedulers:
            raise ValueError(f"ChainedScheduler: expected a non-empty list of schedulers, got "
                             f"{schedulers!r}")
        optimizer = getattr(schedulers[0], "optimizer", None)
        for i, scheduler in enumerate(schedulers):
            if not isinstance(scheduler, LRScheduler) or not hasattr(scheduler, "_lr_at"):
                raise ValueError(f"ChainedScheduler: scheduler {i} ({type(scheduler).__name__}) has "
                                 f"no closed form (lr as a function of the step); chain StepLR, "
                                 f"MultiStepLR, CosineAnnealingLR, LinearLR or OneFlow's schedulers")
            if scheduler.optimizer is not optimizer:
                raise ValueError(f"ChainedScheduler: scheduler {i} ({type(scheduler).__name__}) "
                                 f"belongs to another optimizer than scheduler 0")
        self.schedulers = list(schedulers)
        for group in optimizer.param_groups:  # the schedulers' constructors set their own lr
            group["lr"] = group["initial_lr"]
        super().__init__(optimizer)

    def _lr_at(self, base_lr, step):
        for scheduler in self.schedulers:
            base_lr = scheduler._lr_at(base_lr, step)
        return base_lr

    def step(self, epoch=None):
        super().step(epoch)
        for scheduler in self.schedulers:
            scheduler.last_epoch = self.last_epoch
            scheduler._last_lr = self._last_lr

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "schedulers")}
        state["schedulers"] = [s.state_dict() for s in self.schedulers]
        return state

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        schedulers = state_dict.pop("schedulers")
        if len(schedulers) != len(self.schedulers):
            raise ValueError(f"ChainedScheduler.load_state_dict: the state dict has "
                             f"{len(schedulers)} schedulers, this chain has {len(self.schedulers)}")
        self.__dict__.update(state_dict)
        for scheduler, state in zip(self.schedulers, schedulers):
            scheduler.load_state_dict(state)


class MultiplicativeLR(LRScheduler):
    """lr *= lr_lambda(step) at each step after the first."""

    def __init__(self, optimizer, lr_lambda, last_step=-1, verbose=False, last_epoch=None):
        groups = optimizer.param_groups
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * len(groups)
        if len(self.lr_lambdas) != len(groups):
            raise ValueError(f"MultiplicativeLR: expected {len(groups)} lr_lambdas, got {len(self.lr_lambdas)}")
        super().__init__(optimizer, last_step if last_epoch is None else last_epoch, verbose)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch > 0:
            return [g["lr"] * fn(self.last_epoch) for fn, g in zip(self.lr_lambdas, groups)]
        return [g["lr"] for g in groups]
