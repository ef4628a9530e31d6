// A fixture for the layering check (tests/CMakeLists.txt): the state knows no view.
#pragma once
#include "ui/workers/job_runner.h"
#include "ui/views/view.h"
