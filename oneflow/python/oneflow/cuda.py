"""CUDA queries. This build has no CUDA backend yet, so no device is ever available."""


def is_available():
    return False


def device_count():
    return 0


def current_device():
    raise RuntimeError("oneflow.cuda.current_device: no CUDA device is available in this build")


def synchronize(device=None):
    return None


def manual_seed_all(seed):
    return None
