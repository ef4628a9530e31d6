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
  "inspect:attention io quant util"
  "bench:attention capacity diagnose engine inspect io metrics model modelfile quant report search sensitivity synth tokenize util")

# The layers of ui/ (docs/architecture.md, "Layers"), checked the same way before kvscope_ui
# compiles: the files directly in ui/ (the window, the headless launch) are the module "window".
# state holds the document (ui/state/session.h) and the lanes that feed the views, and knows no
# widget; views show the state and send it the user's edits; nothing below the window includes it.
set(KVSCOPE_UI_LAYERS
  "workers:"
  "state:workers"
  "export:"
  "widgets:export state workers"
  "views:export state widgets workers"
  "dialogs:export state widgets workers"
  "window:dialogs export state views widgets workers")
