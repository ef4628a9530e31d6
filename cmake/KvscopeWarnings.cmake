# SPDX-License-Identifier: GPL-3.0-or-later
# One INTERFACE target carries warnings and sanitizer flags; our targets link it.
add_library(kvscope_warnings INTERFACE)
target_compile_options(kvscope_warnings INTERFACE
  $<$<COMPILE_LANG_AND_ID:CXX,GNU,Clang>:-Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wpedantic
    -Wimplicit-fallthrough -Wno-sign-conversion>)

add_library(kvscope_options INTERFACE)
# No multiply-add contraction anywhere: the AVX-512 clones of the hot loops (core/quant/simd.h)
# have FMA instructions, and a contracted a*b+c rounds once where the spec's formulas and the
# scalar reference round twice.
target_compile_options(kvscope_options INTERFACE $<$<COMPILE_LANG_AND_ID:CXX,GNU,Clang>:-ffp-contract=off>)
if(KVSCOPE_PORTABLE)
  target_compile_definitions(kvscope_options INTERFACE KVSCOPE_PORTABLE)
endif()
if(KVSCOPE_SANITIZE)
  target_compile_options(kvscope_options INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer
                                                   -fno-sanitize-recover=undefined)
  target_link_options(kvscope_options INTERFACE -fsanitize=address,undefined)
endif()
