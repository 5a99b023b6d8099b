"""Reading switches from environment variables, as OneFlow's oneflow.support.env_var_util does.

    parse_boolean_from_env("ONEFLOW_PROFILER_VERBOSE", False)   # "1", "true", "on" -> True
    parse_integer_from_env("ONEFLOW_SOME_SIZE", 4)
"""

import os

_TRUE = ("1", "true", "yes", "on", "y", "t")
_FALSE = ("0", "false", "no", "off", "n", "f", "")


def string_to_bool(env_var, text):
    low = text.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError(f"environment variable {env_var}={text!r}: expected a boolean "
                     f"(one of {', '.join(_TRUE + _FALSE[:-1])})")


def parse_boolean_from_env(env_var, default_value):
    text = os.getenv(env_var)
    return default_value if text is None else string_to_bool(env_var, text)


def parse_integer_from_env(env_var, default_value):
    text = os.getenv(env_var)
    if text is None:
        return default_value
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"environment variable {env_var}={text!r}: expected an integer") from None
