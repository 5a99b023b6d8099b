"""Assembles the wheel from the package sources and a built extension (tools/build_wheel.sh
builds the extension and calls this):

    python3 tools/wheel.py --python /usr/bin/python3 --extension bazel-bin/oneflow/_oneflow_internal.so

As auditwheel repairs a wheel: every shared library the extension needs beyond glibc and
libstdc++ (oneDNN, OpenBLAS, Gloo, gRPC, protobuf, abseil, ...) is copied into oneflow.libs/
under a name with a hash of its contents (libprotobuf-1a2b3c4d.so.32), so that a process which
also loaded another copy of the library (PyTorch, grpcio) keeps both apart; the extension finds
them through an RPATH of $ORIGIN/../oneflow.libs, and they find each other through $ORIGIN.
CUDA libraries are not bundled: they are opened at run time (core/kernels/cuda/cuda_libs.cc).
"""

import argparse
import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = os.path.join(ROOT, "oneflow", "python")  # oneflow/, flowvision/
LIBS = "oneflow.libs"

# What every Linux with glibc and a C++ runtime already has (the manylinux policy's list).
SYSTEM = re.compile(r"^(linux-vdso|ld-linux.*|libc|libm|libdl|libpthread|librt|libutil|libresolv|"
                    r"libnsl|libcrypt|libstdc\+\+|libgcc_s)\.so")


def python_info(python):
    code = ("import sys, sysconfig; print('%d%d' % sys.version_info[:2]); "
            "print(sysconfig.get_config_var('EXT_SUFFIX'))")
    out = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True)
    tag, suffix = out.stdout.split()
    return tag, suffix


def package_version():
    with open(os.path.join(PACKAGES, "oneflow", "__init__.py")) as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    return m.group(1)


def needed_libraries(path):
    """{soname: resolved path} of the libraries `path` loads, transitively, outside SYSTEM."""
    out = subprocess.run(["ldd", path], check=True, capture_output=True, text=True).stdout
    libs = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if m is None:
            continue
        soname, where = m.groups()
        if where == "not":
            raise SystemExit(f"wheel: {path} needs {soname}, which the loader cannot find")
        if not SYSTEM.match(soname):
            libs[soname] = os.path.realpath(where)
    return libs


def patchelf(*args):
    subprocess.run(["patchelf", *args], check=True)


def hashed_name(soname, path):
    """libfoo.so.3 -> libfoo-<8 hex digits of the contents>.so.3, as auditwheel names them."""
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:8]
    stem, _, rest = soname.partition(".so")
    return f"{stem}-{digest}.so{rest}"


def bundle(extension, staged_extension, libs_dir):
    """Copies the extension's libraries into libs_dir under hashed names and points the
    extension and them at each other. Returns {soname: bundled name}."""
    libs = needed_libraries(extension)
    names = {soname: hashed_name(soname, path) for soname, path in libs.items()}
    os.makedirs(libs_dir, exist_ok=True)
    for soname, path in libs.items():
        dest = os.path.join(libs_dir, names[soname])
        shutil.copyfile(path, dest)
        os.chmod(dest, 0o755)
        patchelf("--set-soname", names[soname], dest)
    for target, rpath in [(staged_extension, "$ORIGIN/../" + LIBS)] + [
            (os.path.join(libs_dir, n), "$ORIGIN") for n in names.values()]:
        needed = subprocess.run(["patchelf", "--print-needed", target], check=True,
                                capture_output=True, text=True).stdout.split()
        replace = [a for soname in needed if soname in names
                   for a in ("--replace-needed", soname, names[soname])]
        if replace:
            patchelf(*replace, target)
        patchelf("--set-rpath", rpath, target)
    return names


def copy_packages(stage):
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "_oneflow_internal*.so")
    tops = []
    for name in sorted(os.listdir(PACKAGES)):
        src = os.path.join(PACKAGES, name)
        if os.path.isfile(os.path.join(src, "__init__.py")):
            shutil.copytree(src, os.path.join(stage, name), ignore=ignore)
            tops.append(name)
    return tops


def record_line(stage, rel):
    with open(os.path.join(stage, rel), "rb") as f:
        data = f.read()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={digest},{len(data)}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", required=True, help="the CPython the wheel is for")
    ap.add_argument("--extension", required=True, help="the built _oneflow_internal .so")
    ap.add_argument("--out", default=os.path.join(ROOT, "dist"))
    args = ap.parse_args()

    tag, ext_suffix = python_info(args.python)
    version = package_version()
    py_tag = f"cp{tag}"
    wheel_tag = f"{py_tag}-{py_tag}-linux_x86_64"
    dist_info = f"oneflow-{version}.dist-info"
    with tempfile.TemporaryDirectory(prefix="oneflow-wheel-") as stage:
        tops = copy_packages(stage)
        staged_extension = os.path.join(stage, "oneflow", "_oneflow_internal" + ext_suffix)
        shutil.copyfile(args.extension, staged_extension)
        os.chmod(staged_extension, 0o755)
        subprocess.run(["strip", "--strip-unneeded", staged_extension], check=True)
        names = bundle(args.extension, staged_extension, os.path.join(stage, LIBS))

        os.makedirs(os.path.join(stage, dist_info))
        meta = {
            "METADATA": (
                "Metadata-Version: 2.1\n"
                "Name: oneflow\n"
                f"Version: {version}\n"
                "Summary: Global-tensor deep learning on a C++ core, with OneFlow's and "
                "PyTorch's Python API\n"
                "Requires-Python: >=3.10\n"
                "Provides-Extra: numpy\n"
                "Requires-Dist: numpy>=1.21; extra == \"numpy\"\n"),
            "WHEEL": (
                "Wheel-Version: 1.0\n"
                "Generator: oneflow tools/wheel.py\n"
                "Root-Is-Purelib: false\n"
                f"Tag: {wheel_tag}\n"),
            "top_level.txt": "".join(t + "\n" for t in tops),
        }
        for name, text in meta.items():
            with open(os.path.join(stage, dist_info, name), "w") as f:
                f.write(text)

        files = sorted(os.path.relpath(os.path.join(d, f), stage)
                       for d, _, fs in os.walk(stage) for f in fs)
        record = f"{dist_info}/RECORD"
        lines = [record_line(stage, rel) for rel in files] + [f"{record},,"]
        os.makedirs(args.out, exist_ok=True)
        wheel = os.path.join(args.out, f"oneflow-{version}-{wheel_tag}.whl")
        tmp = wheel + ".part"
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            # dist-info last, as wheel tools write it.
            for rel in sorted(files, key=lambda r: (r.startswith(dist_info), r)):
                path = os.path.join(stage, rel)
                info = zipfile.ZipInfo.from_file(path, rel)
                info.compress_type = zipfile.ZIP_DEFLATED
                with open(path, "rb") as f:
                    z.writestr(info, f.read())
            z.writestr(record, "\n".join(lines) + "\n")
        os.replace(tmp, wheel)
    print(f"wheel: {len(names)} libraries bundled: {', '.join(sorted(names))}", file=sys.stderr)
    print(wheel)


if __name__ == "__main__":
    main()
