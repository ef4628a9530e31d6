// A fixture for the layering check (tests/CMakeLists.txt): a module the table does not list.
#pragma once
