// A fixture for the layering check (tests/CMakeLists.txt): nothing below the window includes it.
#pragma once
#include "ui/main_window.h"
