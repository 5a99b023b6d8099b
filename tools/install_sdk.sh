#!/usr/bin/env bash
# Installs the C++ SDK under a prefix, for projects outside this repository:
#
#   tools/install_sdk.sh [--prefix DIR]          (default /usr/local)
#
#   DIR/lib/liboneflow.so.X.Y.Z, liboneflow.so.X (its soname), liboneflow.so
#   DIR/include/oneflow/...                       the public headers (oneflow/api/cpp/oneflow.h
#                                                 and every header it includes, nothing else)
#   DIR/lib/cmake/OneFlow/OneFlowConfig.cmake     find_package(OneFlow CONFIG REQUIRED):
#                                                 target OneFlow::oneflow, OneFlow_VERSION
#   DIR/lib/pkgconfig/oneflow.pc                  pkg-config --cflags --libs oneflow
#
# The version comes from oneflow/api/cpp/version.h. Builds the library first (Bazel).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX=/usr/local
while (($#)); do
  case "$1" in
    --prefix) PREFIX="${2:?install_sdk.sh: --prefix needs a directory}"; shift 2 ;;
    --prefix=*) PREFIX="${1#--prefix=}"; shift ;;
    -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "install_sdk.sh: unknown argument '$1' (usage: tools/install_sdk.sh [--prefix DIR])" >&2
       exit 2 ;;
  esac
done
mkdir -p "$PREFIX"
PREFIX="$(cd "$PREFIX" && pwd)"
cd "$ROOT"

version_part() { sed -n "s/^#define ONEFLOW_VERSION_$1 \([0-9]*\)$/\1/p" oneflow/api/cpp/version.h; }
MAJOR=$(version_part MAJOR) MINOR=$(version_part MINOR) PATCH=$(version_part PATCH)
VERSION="$MAJOR.$MINOR.$PATCH"

bazel build //oneflow:liboneflow.so >&2
LIB=bazel-bin/oneflow/liboneflow.so
SONAME=$(readelf -d "$LIB" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
if [[ "$SONAME" != "liboneflow.so.$MAJOR" ]]; then
  echo "install_sdk.sh: the library's soname is '$SONAME' but version.h says major $MAJOR" \
       "(oneflow/BUILD.bazel's -soname must follow it)" >&2
  exit 1
fi

# The library, its soname link and the development link.
install -d "$PREFIX/lib" "$PREFIX/lib/cmake/OneFlow" "$PREFIX/lib/pkgconfig"
install -m 0755 "$LIB" "$PREFIX/lib/liboneflow.so.$VERSION"
ln -sfn "liboneflow.so.$VERSION" "$PREFIX/lib/liboneflow.so.$MAJOR"
ln -sfn "liboneflow.so.$MAJOR" "$PREFIX/lib/liboneflow.so"

# The headers the umbrella header reaches, with their paths in this repository (they include
# each other as "core/tensor.h", so the include directory is DIR/include/oneflow).
declare -A seen=([oneflow/api/cpp/oneflow.h]=1)
queue=(oneflow/api/cpp/oneflow.h)
while ((${#queue[@]})); do
  f=${queue[0]}
  queue=("${queue[@]:1}")
  for inc in $(grep -oP '^#include "\K[^"]+' "$f"); do
    if [[ -f "$inc" && -z "${seen[$inc]:-}" ]]; then
      seen[$inc]=1
      queue+=("$inc")
    fi
  done
done
rm -rf "$PREFIX/include/oneflow"
for h in "${!seen[@]}"; do
  install -D -m 0644 "$h" "$PREFIX/include/oneflow/$h"
done

cat > "$PREFIX/lib/cmake/OneFlow/OneFlowConfig.cmake" <<EOF
# OneFlow C++ SDK $VERSION, installed by tools/install_sdk.sh.
#   find_package(OneFlow CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE OneFlow::oneflow)
include(CMakeFindDependencyMacro)
find_dependency(Threads)
get_filename_component(_oneflow_prefix "\${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(OneFlow_VERSION $VERSION)
if(NOT TARGET OneFlow::oneflow)
  add_library(OneFlow::oneflow SHARED IMPORTED)
  set_target_properties(OneFlow::oneflow PROPERTIES
    IMPORTED_LOCATION "\${_oneflow_prefix}/lib/liboneflow.so.$VERSION"
    IMPORTED_SONAME "liboneflow.so.$MAJOR"
    INTERFACE_INCLUDE_DIRECTORIES "\${_oneflow_prefix}/include/oneflow"
    INTERFACE_COMPILE_FEATURES cxx_std_17
    INTERFACE_LINK_LIBRARIES Threads::Threads)
endif()
set(OneFlow_INCLUDE_DIRS "\${_oneflow_prefix}/include/oneflow")
set(OneFlow_LIBRARIES OneFlow::oneflow)
unset(_oneflow_prefix)
EOF

cat > "$PREFIX/lib/cmake/OneFlow/OneFlowConfigVersion.cmake" <<EOF
# Compatible when the major versions agree and the installed one is not older.
set(PACKAGE_VERSION $VERSION)
if(PACKAGE_FIND_VERSION_MAJOR STREQUAL "$MAJOR" AND
   NOT PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
elseif(NOT PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
else()
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
endif()
EOF

cat > "$PREFIX/lib/pkgconfig/oneflow.pc" <<EOF
prefix=$PREFIX
libdir=\${prefix}/lib
includedir=\${prefix}/include/oneflow

Name: oneflow
Description: OneFlow-style global tensors in C++: tensors, autograd, modules, SBP, collectives
Version: $VERSION
Cflags: -std=c++17 -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -loneflow -pthread
EOF

if [[ "$PREFIX" == /usr/local || "$PREFIX" == /usr ]] && [[ $(id -u) -eq 0 ]]; then
  ldconfig
fi
echo "install_sdk.sh: installed the OneFlow C++ SDK $VERSION under $PREFIX" >&2
