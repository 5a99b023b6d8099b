// The C++ SDK's version: the installed library is liboneflow.so.<major>.<minor>.<patch> with
// soname liboneflow.so.<major>; CMake's OneFlow_VERSION and pkg-config's Version say the same.
// tools/install_sdk.sh reads the numbers from here.
#pragma once

#define ONEFLOW_VERSION_MAJOR 0
#define ONEFLOW_VERSION_MINOR 1
#define ONEFLOW_VERSION_PATCH 0
#define ONEFLOW_VERSION "0.1.0"
