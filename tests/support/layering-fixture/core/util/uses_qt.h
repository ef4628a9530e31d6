// A fixture for the layering check (tests/CMakeLists.txt): core never includes Qt.
#pragma once
#include <QString>
