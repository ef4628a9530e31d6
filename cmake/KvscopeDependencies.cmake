# SPDX-License-Identifier: GPL-3.0-or-later
# Every dependency comes from a Debian 12 package; a missing one stops configure and names it.

macro(kvscope_require found debian_package what)
  if(NOT ${found})
    message(FATAL_ERROR "kvscope needs ${what}: install the Debian package '${debian_package}' "
                        "(sudo apt-get install ${debian_package}), or run scripts/setup.sh")
  endif()
endmacro()

find_package(Threads REQUIRED)

find_package(Eigen3 3.3 NO_MODULE QUIET)
kvscope_require(Eigen3_FOUND libeigen3-dev "Eigen 3")

find_package(HDF5 QUIET COMPONENTS C)
kvscope_require(HDF5_FOUND libhdf5-dev "the HDF5 C library")
if(NOT TARGET kvscope::hdf5)
  add_library(kvscope::hdf5 INTERFACE IMPORTED)
  target_include_directories(kvscope::hdf5 INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
  target_link_libraries(kvscope::hdf5 INTERFACE ${HDF5_C_LIBRARIES} ${HDF5_LIBRARIES})
  target_compile_definitions(kvscope::hdf5 INTERFACE ${HDF5_DEFINITIONS} H5_USE_110_API)
endif()

find_package(nlohmann_json 3 QUIET)
kvscope_require(nlohmann_json_FOUND nlohmann-json3-dev "nlohmann-json")

find_package(CLI11 QUIET CONFIG)
if(NOT CLI11_FOUND)
  find_path(KVSCOPE_CLI11_INCLUDE CLI/CLI.hpp)
  kvscope_require(KVSCOPE_CLI11_INCLUDE libcli11-dev "CLI11")
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE ${KVSCOPE_CLI11_INCLUDE})
endif()

# The tokenizers (core/tokenize): PCRE2 runs the pre-tokenizer regexes as Unicode regexes (UTF +
# UCP), ICU normalizes text (NFC and friends) as tokenizer.json normalizers ask.
find_package(PkgConfig QUIET)
kvscope_require(PKG_CONFIG_FOUND pkg-config "pkg-config (to find PCRE2 and ICU)")
pkg_check_modules(KVSCOPE_PCRE2 QUIET IMPORTED_TARGET libpcre2-8)
kvscope_require(KVSCOPE_PCRE2_FOUND libpcre2-dev "PCRE2 (8-bit library, for the tokenizers' Unicode regexes)")
pkg_check_modules(KVSCOPE_ICU QUIET IMPORTED_TARGET icu-uc)
kvscope_require(KVSCOPE_ICU_FOUND libicu-dev "ICU (icu-uc, for the tokenizers' Unicode normalization)")

find_package(OpenMP QUIET COMPONENTS CXX)
kvscope_require(OpenMP_CXX_FOUND libomp-dev "OpenMP (g++ ships it; for clang: libomp-dev)")

if(KVSCOPE_BUILD_TESTS)
  find_package(GTest QUIET)
  kvscope_require(GTest_FOUND libgtest-dev "GoogleTest")
endif()

if(KVSCOPE_BUILD_BENCHMARKS)
  find_package(benchmark QUIET)
  kvscope_require(benchmark_FOUND libbenchmark-dev "Google Benchmark")
endif()

if(KVSCOPE_BUILD_GUI)
  find_package(Qt6 6.4 QUIET COMPONENTS Widgets)
  kvscope_require(Qt6Widgets_FOUND qt6-base-dev "Qt 6 Widgets")
  find_package(Qt6 6.4 QUIET COMPONENTS OpenGL)
  kvscope_require(Qt6OpenGL_FOUND libqt6opengl6-dev "Qt 6 OpenGL (needed by Qt Charts)")
  find_package(Qt6 6.4 QUIET COMPONENTS Charts)
  kvscope_require(Qt6Charts_FOUND qt6-charts-dev "Qt 6 Charts")
  find_package(Qt6 6.4 QUIET COMPONENTS Svg SvgWidgets)
  kvscope_require(Qt6Svg_FOUND qt6-svg-dev "Qt 6 Svg")
  find_package(Qt6 6.4 QUIET COMPONENTS PrintSupport)
  kvscope_require(Qt6PrintSupport_FOUND qt6-base-dev "Qt 6 PrintSupport")
  if(KVSCOPE_BUILD_TESTS)
    find_package(Qt6 6.4 QUIET COMPONENTS Test)
    kvscope_require(Qt6Test_FOUND qt6-base-dev "Qt 6 Test")
  endif()
endif()
