# SPDX-License-Identifier: GPL-3.0-or-later
# One INTERFACE target carries warnings and sanitizer flags; our targets link it.
add_library(kvscope_warnings INTERFACE)
target_compile_options(kvscope_warnings INTERFACE
  $<$<COMPILE_LANG_AND_ID:CXX,GNU,Clang>:-Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wpedantic
    -Wimplicit-fallthrough -Wno-sign-conversion>)

add_library(kvscope_options INTERFACE)
if(KVSCOPE_SANITIZE)
  target_compile_options(kvscope_options INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer
                                                   -fno-sanitize-recover=undefined)
  target_link_options(kvscope_options INTERFACE -fsanitize=address,undefined)
endif()
