# SPDX-License-Identifier: GPL-3.0-or-later
# The layers of core (docs/architecture.md, "Layers"): each module of core/ and the modules it may
# include and link. core/CMakeLists.txt builds one library per module from this table, and
# cmake/CheckLayers.cmake refuses, at build time, an include that runs the wrong way. A new
# module is one line here.
set(KVSCOPE_CORE_LAYERS
  "util:"
  "tokenize:util"
  "io:util"
  "quant:util"
  "attention:util"
  "engine:quant util"
  "capacity:quant util"
  "synth:io quant util"
  "modelfile:quant util"
  "model:engine io modelfile quant tokenize util"
  "metrics:attention io quant util"
  "report:attention io metrics quant util"
  "search:attention engine io metrics quant report util"
  "sensitivity:attention engine io metrics quant report search util"
  "diagnose:attention io metrics quant util"
  "command:attention diagnose engine io metrics quant report search sensitivity util"
  "bench:attention capacity diagnose engine io metrics model modelfile quant report search sensitivity synth tokenize util")
