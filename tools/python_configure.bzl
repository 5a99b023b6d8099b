"""Writes @local_config_python: the C headers of the CPython that a wheel is built for
(tools/build_wheel.sh), as //:headers.

ONEFLOW_WHEEL_PYTHON names the interpreter (default /usr/bin/python3); only the wheel's
extension (//oneflow:_oneflow_internal_wheel.so, built on demand) depends on this repository,
so a build without wheels never runs it.
"""

def _python_configure_impl(ctx):
    python = ctx.os.environ.get("ONEFLOW_WHEEL_PYTHON", "/usr/bin/python3")
    r = ctx.execute([python, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"])
    if r.return_code != 0:
        fail("python_configure: cannot run %s (ONEFLOW_WHEEL_PYTHON): %s" % (python, r.stderr))
    include = r.stdout.strip()
    if not ctx.path(include + "/Python.h").exists:
        fail("python_configure: %s has no headers (%s/Python.h is missing)" % (python, include))
    ctx.symlink(include, "include")
    ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])

# Python.h and friends of %s.
cc_library(
    name = "headers",
    hdrs = glob(["include/**/*.h"]),
    includes = ["include"],
)
""" % python)

python_configure = repository_rule(
    implementation = _python_configure_impl,
    environ = ["ONEFLOW_WHEEL_PYTHON"],
    local = True,
)
