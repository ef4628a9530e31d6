// A fixture for the layering check (tests/CMakeLists.txt): quant may not read dumps.
#pragma once
#include "core/util/status.h"
#include "core/io/dump.h"
