// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/sensitivity/plan_search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/engine/engine.h"
#include "core/report/report_format.h"
#include "core/util/json_text.h"

namespace kvscope {

// ---- The solver ------------------------------------------------------------------------------

namespace {

struct State {
  double cost = 0;
  std::array<double, 2> d{0, 0};  // running sum (mean bounds) or running max (maximum bounds)
  int parent = -1;                // index into the previous layer's states
  int option = -1;
};

bool lexLess(const State& a, const State& b) {
  if (a.cost != b.cost) return a.cost < b.cost;
  if (a.d[0] != b.d[0]) return a.d[0] < b.d[0];
  return a.d[1] < b.d[1];
}

}  // namespace

PlanSolution cheapestPlan(const std::vector<std::vector<PlanOption>>& layers,
                          const std::array<PlanBound, 2>& bounds, size_t stateLimit) {
  PlanSolution out;
  const size_t L = layers.size();
  if (L == 0) return out;
  stateLimit = std::max<size_t>(stateLimit, 2);
  // A mean bound over L layers is a bound on the sum: Σ ≤ bound·L. Pruning allows a relative
  // slack of 1e-12 for the order of additions; the answer is checked without it.
  std::array<double, 2> sumBound{0, 0};
  for (int k = 0; k < 2; ++k) sumBound[k] = bounds[k].bound * static_cast<double>(L);
  auto usable = [&](const PlanOption& o) {
    for (int k = 0; k < 2; ++k) {
      if (!bounds[k].active) continue;
      if (std::isnan(o.damage[k])) return false;
      if (bounds[k].maximum && o.damage[k] > bounds[k].bound) return false;
    }
    return !std::isnan(o.cost);
  };
  // The least damage the remaining layers can add (mean bounds): states beyond reach are dropped.
  std::vector<std::array<double, 2>> suffixMin(L + 1, {0, 0});
  for (size_t l = L; l-- > 0;) {
    for (int k = 0; k < 2; ++k) {
      double m = std::numeric_limits<double>::infinity();
      for (const PlanOption& o : layers[l]) {
        if (usable(o)) m = std::min(m, bounds[k].active ? o.damage[k] : 0.0);
      }
      suffixMin[l][k] = suffixMin[l + 1][k] + m;
    }
  }
  const int active = (bounds[0].active ? 1 : 0) + (bounds[1].active ? 1 : 0);
  std::vector<std::vector<State>> kept(L);
  std::vector<State> current{State{}};
  for (size_t l = 0; l < L; ++l) {
    std::vector<State> next;
    for (size_t s = 0; s < current.size(); ++s) {
      for (size_t o = 0; o < layers[l].size(); ++o) {
        const PlanOption& opt = layers[l][o];
        if (!usable(opt)) continue;
        State n;
        n.cost = current[s].cost + opt.cost;
        n.parent = static_cast<int>(s);
        n.option = static_cast<int>(o);
        bool reachable = true;
        for (int k = 0; k < 2; ++k) {
          if (!bounds[k].active) continue;
          if (bounds[k].maximum) {
            n.d[k] = std::max(current[s].d[k], opt.damage[k]);
          } else {
            n.d[k] = current[s].d[k] + opt.damage[k];
            const double slack = 1e-12 * std::max(1.0, std::fabs(sumBound[k]));
            if (n.d[k] + suffixMin[l + 1][k] > sumBound[k] + slack) reachable = false;
          }
        }
        if (reachable) next.push_back(n);
      }
    }
    std::sort(next.begin(), next.end(), lexLess);
    // Keep the states no other state dominates (≤ cost and ≤ damage in every dimension).
    std::vector<State> front;
    if (active <= 1) {
      const int k = bounds[0].active ? 0 : 1;
      double best = std::numeric_limits<double>::infinity();
      for (const State& s : next) {
        const double v = active == 0 ? 0.0 : s.d[k];
        if (front.empty() || v < best) {
          front.push_back(s);
          best = v;
          if (active == 0) break;  // no bound: the cheapest state is the answer
        }
      }
    } else {
      for (const State& s : next) {
        bool dominated = false;
        for (const State& f : front) {
          if (f.d[0] <= s.d[0] && f.d[1] <= s.d[1]) {
            dominated = true;
            break;
          }
        }
        if (!dominated) front.push_back(s);
      }
    }
    if (front.size() > stateLimit) {
      // Thinned: an even sample over the cost range, cheapest and dearest kept.
      std::vector<State> sample;
      for (size_t i = 0; i < stateLimit; ++i) {
        sample.push_back(front[i * (front.size() - 1) / (stateLimit - 1)]);
      }
      front = std::move(sample);
      out.exact = false;
    }
    if (front.empty()) return out;
    kept[l] = front;
    current = std::move(front);
  }
  // The first state in (cost, damage) order that meets every bound exactly.
  int best = -1;
  for (size_t s = 0; s < current.size(); ++s) {
    bool ok = true;
    for (int k = 0; k < 2; ++k) {
      if (!bounds[k].active || bounds[k].maximum) continue;
      if (!(current[s].d[k] / static_cast<double>(L) <= bounds[k].bound)) ok = false;
    }
    if (ok) {
      best = static_cast<int>(s);
      break;
    }
  }
  if (best < 0) return out;
  out.found = true;
  out.cost = current[static_cast<size_t>(best)].cost;
  for (int k = 0; k < 2; ++k) {
    const double d = current[static_cast<size_t>(best)].d[k];
    out.aggregate[k] = bounds[k].maximum ? d : d / static_cast<double>(L);
  }
  out.choice.assign(L, -1);
  int idx = best;
  for (size_t l = L; l-- > 0;) {
    const State& s = kept[l][static_cast<size_t>(idx)];
    out.choice[l] = s.option;
    idx = s.parent;
  }
  return out;
}

// ---- Engines' types ----------------------------------------------------------------------------
// Every engine's cache types, plan shape and plan → flags mapping live in its row (core/engine/,
// EngineDef): nothing here names an engine.

Plan compactPlan(const std::vector<QuantSpec>& perLayer) {
  Plan plan;
  if (perLayer.empty()) return plan;
  // The most frequent spec (first met on ties) is the base.
  std::map<std::string, int> count;
  std::vector<std::string> order;
  std::vector<std::string> names;
  for (const QuantSpec& s : perLayer) {
    names.push_back(toString(s));
    if (count[names.back()]++ == 0) order.push_back(names.back());
  }
  std::string base = order.front();
  for (const std::string& n : order) {
    if (count[n] > count[base]) base = n;
  }
  const int L = static_cast<int>(perLayer.size());
  for (int l = 0; l < L; ++l) {
    if (names[static_cast<size_t>(l)] == base) {
      plan.base = perLayer[static_cast<size_t>(l)];
      break;
    }
  }
  for (const std::string& n : order) {
    if (n == base) continue;
    PlanOverride o;
    for (int l = 0; l < L; ++l) {
      if (names[static_cast<size_t>(l)] != n) continue;
      o.spec = perLayer[static_cast<size_t>(l)];
      int e = l;
      while (e + 1 < L && names[static_cast<size_t>(e + 1)] == n) ++e;
      LayerRange r;
      r.kind = LayerRange::Kind::Span;
      r.from = l;
      r.to = e;
      o.layers.push_back(r);
      l = e;
    }
    plan.overrides.push_back(std::move(o));
  }
  return plan;
}

std::vector<EngineFlags> engineFlagsFor(const Plan& key, const Plan& value, const DumpInfo& info) {
  std::vector<EngineFlags> out;
  const int L = info.layers;
  auto kr = resolve(key, L);
  auto vr = resolve(value, L);
  if (!kr || !vr) return out;
  std::vector<std::string> ks, vs;
  for (const QuantSpec& s : *kr) ks.push_back(toString(s));
  for (const QuantSpec& s : *vr) vs.push_back(toString(s));
  const KvShape shape{info.headDim, info.layers, info.kvHeads, info.model};
  for (const EngineDef* e : planEngines()) out.push_back(e->planFlags(ks, vs, shape));
  return out;
}

// ---- Plans from a map ------------------------------------------------------------------------

namespace {

// One choosable type of the search: a K candidate and a V candidate of the map (-1: not there).
struct Choice {
  std::string name;
  int key = -1, value = -1;
};

int indexOf(const SensitivitySide& side, const std::string& spec) {
  for (size_t c = 0; c < side.candidates.size(); ++c) {
    if (side.candidates[c].spec == spec && side.candidates[c].skipped.empty()) return static_cast<int>(c);
  }
  return -1;
}

// The budget field on one layer for one candidate, turned into a "≤" damage (top1 negated).
double damageOf(const SensitivitySide& side, size_t li, int c, const Budget& b) {
  if (c < 0 || !side.candidates[static_cast<size_t>(c)].skipped.empty()) return std::nan("");
  const double v = attentionFieldValue(side.layerSummary(li, static_cast<size_t>(c)), b.field);
  return isMinimumField(b.field) ? -v : v;
}

PlanBound boundOf(const std::optional<Budget>& b) {
  PlanBound p;
  if (!b) return p;
  p.active = true;
  p.maximum = b->field == AttentionField::ScoreMax || b->field == AttentionField::KlMax;
  p.bound = isMinimumField(b->field) ? -b->bound : b->bound;
  return p;
}

double shown(const std::optional<Budget>& b, double d) {
  return b && isMinimumField(b->field) ? -d : d;
}

struct SidePick {
  bool found = false;
  bool exact = true;
  std::vector<int> perLayer;  // candidate index per layer
  double aggregate = 0;
};

// Uniform: the cheapest candidate whose aggregate meets the bound.
SidePick uniformSide(const SensitivitySide& side, const std::vector<int>& cands, const Budget& b, size_t L) {
  SidePick best;
  double bestCost = std::numeric_limits<double>::infinity();
  const PlanBound pb = boundOf(b);
  for (int c : cands) {
    if (c < 0) continue;
    std::vector<std::vector<PlanOption>> t(L);
    for (size_t li = 0; li < L; ++li) t[li] = {{side.candidates[static_cast<size_t>(c)].bitsPerElement, {damageOf(side, li, c, b), 0}}};
    const PlanSolution s = cheapestPlan(t, {pb, PlanBound{}});
    if (!s.found) continue;
    if (s.cost < bestCost || (s.cost == bestCost && s.aggregate[0] < best.aggregate)) {
      bestCost = s.cost;
      best.found = true;
      best.perLayer.assign(L, c);
      best.aggregate = s.aggregate[0];
    }
  }
  return best;
}

// Any candidate per layer.
SidePick perLayerSide(const SensitivitySide& side, const std::vector<int>& cands, const Budget& b, size_t L) {
  std::vector<std::vector<PlanOption>> t(L);
  for (size_t li = 0; li < L; ++li) {
    for (int c : cands) {
      t[li].push_back({c < 0 ? std::nan("") : side.candidates[static_cast<size_t>(c)].bitsPerElement,
                       {damageOf(side, li, c, b), 0}});
    }
  }
  const PlanSolution s = cheapestPlan(t, {boundOf(b), PlanBound{}});
  SidePick p;
  p.found = s.found;
  p.exact = s.exact;
  p.aggregate = s.aggregate[0];
  if (s.found) {
    for (int o : s.choice) p.perLayer.push_back(cands[static_cast<size_t>(o)]);
  }
  return p;
}

// A base type, the first N and the last M layers overridden (N + M ≤ L): every combination.
SidePick firstLastSide(const SensitivitySide& side, const std::vector<int>& cands, const Budget& b, size_t L) {
  const PlanBound pb = boundOf(b);
  const size_t C = cands.size();
  std::vector<std::vector<double>> d(C, std::vector<double>(L));
  std::vector<double> bits(C);
  for (size_t i = 0; i < C; ++i) {
    bits[i] = cands[i] < 0 ? std::nan("") : side.candidates[static_cast<size_t>(cands[i])].bitsPerElement;
    for (size_t li = 0; li < L; ++li) d[i][li] = damageOf(side, li, cands[i], b);
  }
  SidePick best;
  double bestCost = std::numeric_limits<double>::infinity();
  size_t bestOverrides = 0;
  const double n = static_cast<double>(L);
  for (size_t bi = 0; bi < C; ++bi) {
    if (std::isnan(bits[bi])) continue;
    for (size_t nf = 0; nf <= L; ++nf) {
      for (size_t ai = 0; ai < (nf ? C : 1); ++ai) {
        const size_t a = nf ? ai : bi;
        if (nf && (a == bi || std::isnan(bits[a]))) continue;
        for (size_t nl = 0; nf + nl <= L; ++nl) {
          for (size_t ci = 0; ci < (nl ? C : 1); ++ci) {
            const size_t c = nl ? ci : bi;
            if (nl && (c == bi || std::isnan(bits[c]))) continue;
            double cost = 0, agg = 0;
            bool ok = true;
            for (size_t li = 0; li < L && ok; ++li) {
              const size_t k = li < nf ? a : li >= L - nl ? c : bi;
              const double v = d[k][li];
              if (std::isnan(v)) ok = false;
              cost += bits[k];
              agg = pb.maximum ? std::max(agg, v) : agg + v;
            }
            if (!ok) continue;
            if (!pb.maximum) agg /= n;
            if (!(agg <= pb.bound)) continue;
            const size_t overrides = (nf ? 1 : 0) + (nl ? 1 : 0);
            const bool better = cost < bestCost ||
                                (cost == bestCost && (agg < best.aggregate ||
                                                      (agg == best.aggregate && overrides < bestOverrides)));
            if (!better) continue;
            bestCost = cost;
            bestOverrides = overrides;
            best.found = true;
            best.aggregate = agg;
            best.perLayer.assign(L, cands[bi]);
            for (size_t li = 0; li < nf; ++li) best.perLayer[li] = cands[a];
            for (size_t li = L - nl; li < L; ++li) best.perLayer[li] = cands[c];
          }
        }
      }
    }
  }
  return best;
}

double bitsOfSpec(const QuantSpec& s, const DumpInfo& info) {
  return storageFor(s, info.kvHeads, info.tokens, info.headDim).bitsPerElement();
}

}  // namespace

namespace {

/// The engine `name` names for a plan search: nullptr for "" (any plan), an error for an unknown one.
Expected<const EngineDef*> planEngine(const std::string& name) {
  if (name.empty()) return static_cast<const EngineDef*>(nullptr);
  const EngineDef* def = findEngine(name);
  if (def == nullptr) {
    return Status::invalidArgument("--engine " + name + ": not an engine kvscope knows (known: " + engineNameList() + ")");
  }
  return def;
}

KvShape shapeOf(const DumpInfo& info) { return KvShape{info.headDim, info.layers, info.kvHeads, info.model}; }

}  // namespace

Expected<std::vector<std::string>> planCandidates(const DumpInfo& info, const PlanSearchOptions& options) {
  auto def = planEngine(options.engine);
  if (!def) return def.status();
  if (*def == nullptr || (*def)->planTypes == nullptr) {
    return options.candidates.empty() ? sensitivityCandidates() : options.candidates;
  }
  std::set<std::string> seen;
  std::vector<std::string> unique;
  for (const EngineType& t : (*def)->planTypes(shapeOf(info), nullptr)) {
    for (const std::string& s : {t.key, t.value}) {
      if (seen.insert(s).second) unique.push_back(s);
    }
  }
  return unique;
}

std::vector<std::string> planCandidatesWith(const SearchResult& search) {
  std::vector<std::string> out = sensitivityCandidates();
  for (const TensorChoice* c : {&search.key, &search.value}) {
    if (c->searched && c->found) out.push_back(c->spec);  // the map drops duplicates
  }
  return out;
}

Expected<PlanSearchResult> planFromMap(const SensitivityMap& map, const PlanSearchOptions& options) {
  const DumpInfo& info = map.dump;
  PlanSearchResult r;
  r.dump = info;
  r.keyBudget = options.keyBudget;
  r.valueBudget = options.valueBudget;
  if (!options.keyBudget && !options.valueBudget) {
    return Status::invalidArgument("plan search: give --key-budget, --value-budget or both");
  }
  if (static_cast<int>(map.layers.size()) != info.layers) {
    return Status::invalidArgument("plan search: a plan covers every layer; the map holds " +
                                   std::to_string(map.layers.size()) + " of " + std::to_string(info.layers));
  }
  if ((options.keyBudget && !map.key.mapped) || (options.valueBudget && !map.value.mapped)) {
    return Status::invalidArgument("plan search: the map lacks a side that has a budget");
  }
  const size_t L = map.layers.size();
  const KvShape shape = shapeOf(info);

  // The shape and the choosable types: the engine row's (core/engine), or the map's candidates.
  std::vector<Choice> choices;
  auto engineDef = planEngine(options.engine);
  if (!engineDef) return engineDef.status();
  const EngineDef* def = *engineDef;
  r.engine = def ? std::string(def->name) : std::string();
  std::vector<EngineType> types;
  if (def && def->planTypes != nullptr) {
    r.shape = def->planShape;
    types = def->planTypes(shape, &r.notes);
    if (r.shape == PlanShape::Uniform) {
      r.notes.push_back(std::string(def->name) + " has no per-layer cache types (" + std::string(def->planSummary) +
                        "): the plan is the best uniform pair of its cache types");
    }
  } else {
    r.shape = def ? PlanShape::Uniform : PlanShape::PerLayer;
    const SensitivitySide& any = map.key.mapped ? map.key : map.value;
    for (const SensitivityCandidate& c : any.candidates) types.push_back({c.spec, c.spec, c.spec});
    if (def) {
      r.notes.push_back(std::string(def->name) + ": kvscope models no per-layer cache types for it; the plan is "
                                                 "one candidate per side for every layer (flags are not written)");
    }
  }
  for (const EngineType& t : types) {
    choices.push_back({t.name, map.key.mapped ? indexOf(map.key, t.key) : -1,
                       map.value.mapped ? indexOf(map.value, t.value) : -1});
  }
  std::vector<int> keyCands, valueCands;
  for (const Choice& c : choices) {
    keyCands.push_back(c.key);
    valueCands.push_back(c.value);
  }

  // Per side: candidate index per layer, or a fixed spec per layer.
  std::vector<int> keyPick(L, -1), valuePick(L, -1);
  bool found = true;
  if (r.shape == PlanShape::SkipLayers) {
    // One type for K and V, each layer either that type or what skipped layers keep (the row's
    // first type): both budgets bound the same choice, a two-dimensional problem per type.
    const int skip = choices.empty() ? -1 : 0;
    double bestCost = std::numeric_limits<double>::infinity();
    found = false;
    for (size_t i = 0; i < choices.size(); ++i) {
      if (static_cast<int>(i) == skip) continue;
      std::vector<std::vector<PlanOption>> t(L);
      const std::array<int, 2> opts{static_cast<int>(i), skip};
      for (size_t li = 0; li < L; ++li) {
        for (int o : opts) {
          PlanOption p;
          if (o < 0) {
            p.cost = std::nan("");
          } else {
            const Choice& c = choices[static_cast<size_t>(o)];
            // Both sides follow the dtype: both count, a side without a budget only for its bits.
            const double kb = c.key >= 0 ? map.key.candidates[static_cast<size_t>(c.key)].bitsPerElement
                              : options.keyBudget ? std::nan("") : 0.0;
            const double vb = c.value >= 0 ? map.value.candidates[static_cast<size_t>(c.value)].bitsPerElement
                              : options.valueBudget ? std::nan("") : 0.0;
            p.cost = kb + vb;
            p.damage = {options.keyBudget ? damageOf(map.key, li, c.key, *options.keyBudget) : 0,
                        options.valueBudget ? damageOf(map.value, li, c.value, *options.valueBudget) : 0};
          }
          t[li].push_back(p);
        }
      }
      const PlanSolution s = cheapestPlan(t, {boundOf(options.keyBudget), boundOf(options.valueBudget)});
      if (!s.found) continue;
      if (!s.exact) r.exact = false;
      if (s.cost < bestCost) {
        bestCost = s.cost;
        found = true;
        for (size_t li = 0; li < L; ++li) {
          const Choice& c = choices[static_cast<size_t>(opts[static_cast<size_t>(s.choice[li])])];
          keyPick[li] = c.key;
          valuePick[li] = c.value;
        }
        r.keyDamage = shown(options.keyBudget, s.aggregate[0]);
        r.valueDamage = shown(options.valueBudget, s.aggregate[1]);
      }
    }
    // A side without a budget takes the dtype's own spec for that side (one dtype for both).
    if (!options.keyBudget || !options.valueBudget) {
      r.notes.push_back(std::string(def->name) + ": " + std::string(def->planSummary) +
                        ": the side without a budget follows the other");
    }
  } else {
    for (int pass = 0; pass < 2; ++pass) {
      const bool isKey = pass == 0;
      const std::optional<Budget>& b = isKey ? options.keyBudget : options.valueBudget;
      if (!b) continue;
      const SensitivitySide& side = isKey ? map.key : map.value;
      const std::vector<int>& cands = isKey ? keyCands : valueCands;
      SidePick p = r.shape == PlanShape::PerLayer    ? perLayerSide(side, cands, *b, L)
                   : r.shape == PlanShape::FirstLast ? firstLastSide(side, cands, *b, L)
                                                     : uniformSide(side, cands, *b, L);
      if (!p.exact) r.exact = false;
      if (!p.found) {
        found = false;
        continue;
      }
      (isKey ? keyPick : valuePick) = p.perLayer;
      (isKey ? r.keyDamage : r.valueDamage) = shown(b, p.aggregate);
    }
  }
  r.found = found;
  if (!r.exact) {
    r.notes.push_back("the search kept at most 200000 states per layer and thinned them: the plan is a "
                      "heuristic answer, not proven cheapest");
  }

  // Per-layer specs of each side.
  auto fixedSpecs = [&](const std::optional<Plan>& fixed) {
    std::vector<QuantSpec> s;
    for (size_t li = 0; li < L; ++li) {
      s.push_back(fixed ? specForLayer(*fixed, map.layers[li], info.layers) : *parseSpec("none"));
    }
    return s;
  };
  std::vector<QuantSpec> keySpecs, valueSpecs;
  for (int pass = 0; pass < 2; ++pass) {
    const bool isKey = pass == 0;
    const std::vector<int>& pick = isKey ? keyPick : valuePick;
    const SensitivitySide& side = isKey ? map.key : map.value;
    std::vector<QuantSpec>& out = isKey ? keySpecs : valueSpecs;
    const bool searched = pick.front() >= 0;
    if (!searched) {
      out = fixedSpecs(isKey ? options.fixedKey : options.fixedValue);
      continue;
    }
    for (size_t li = 0; li < L; ++li) out.push_back(*parseSpec(side.candidates[static_cast<size_t>(pick[li])].spec));
  }
  if (!r.found) {
    r.notes.push_back("no " + std::string(planShapeName(r.shape)) + " plan of the candidates meets " +
                      (options.keyBudget ? "the key budget " + budgetText(*options.keyBudget) : std::string()) +
                      (options.keyBudget && options.valueBudget ? " and " : "") +
                      (options.valueBudget ? "the value budget " + budgetText(*options.valueBudget) : std::string()));
  }

  // Plans: a first/last plan keeps its firstN/lastN form, others are compacted.
  auto planOf = [&](const std::vector<QuantSpec>& specs) {
    Plan p = compactPlan(specs);
    if (r.shape == PlanShape::FirstLast && !p.overrides.empty()) {
      // Rewrite spans touching layer 0 / layer L-1 as firstN / lastN.
      for (PlanOverride& o : p.overrides) {
        for (LayerRange& range : o.layers) {
          if (range.from == 0) range = {LayerRange::Kind::First, 0, 0, range.to + 1};
          else if (range.to == static_cast<int>(L) - 1) range = {LayerRange::Kind::Last, 0, 0, static_cast<int>(L) - range.from};
        }
      }
    }
    return p;
  };
  const double perLayerElements = static_cast<double>(info.kvHeads) * info.headDim;
  r.bytesPerTokenBaseline = static_cast<double>(L) * 2 * 16 * perLayerElements / 8;
  if (r.found) {
    r.key = planOf(keySpecs);
    r.value = planOf(valueSpecs);
    r.keyPlan = toString(r.key);
    r.valuePlan = toString(r.value);
    double kb = 0, vb = 0;
    for (size_t li = 0; li < L; ++li) {
      PlanLayerChoice c;
      c.layer = map.layers[li];
      c.keySpec = toString(keySpecs[li]);
      c.valueSpec = toString(valueSpecs[li]);
      c.keyBits = bitsOfSpec(keySpecs[li], info);
      c.valueBits = bitsOfSpec(valueSpecs[li], info);
      c.keyDamage = options.keyBudget ? shown(options.keyBudget, damageOf(map.key, li, keyPick[li], *options.keyBudget))
                                      : std::nan("");
      c.valueDamage = options.valueBudget
                          ? shown(options.valueBudget, damageOf(map.value, li, valuePick[li], *options.valueBudget))
                          : std::nan("");
      kb += c.keyBits;
      vb += c.valueBits;
      r.layers.push_back(c);
    }
    r.keyBits = kb / static_cast<double>(L);
    r.valueBits = vb / static_cast<double>(L);
    r.bytesPerToken = (kb + vb) * perLayerElements / 8;
    r.engineFlags = engineFlagsFor(r.key, r.value, info);
  }

  // Uniform comparisons over the same types (the map's candidates for a per-layer search).
  {
    auto sideUniform = [&](bool isKey, int c) -> std::pair<double, double> {  // bits, aggregate damage
      const std::optional<Budget>& b = isKey ? options.keyBudget : options.valueBudget;
      const SensitivitySide& side = isKey ? map.key : map.value;
      if (!b) return {std::nan(""), 0};
      if (c < 0) return {std::nan(""), std::nan("")};
      const PlanBound pb = boundOf(b);
      double agg = 0;
      for (size_t li = 0; li < L; ++li) {
        const double v = damageOf(side, li, c, *b);
        agg = pb.maximum ? std::max(agg, v) : agg + v;
      }
      if (!pb.maximum) agg /= static_cast<double>(L);
      return {side.candidates[static_cast<size_t>(c)].bitsPerElement, agg};
    };
    auto fixedBits = [&](const std::optional<Plan>& fixed) {
      const std::vector<QuantSpec> s = fixedSpecs(fixed);
      double sum = 0;
      for (const QuantSpec& q : s) sum += bitsOfSpec(q, info);
      return sum / static_cast<double>(L);
    };
    const bool joint = r.shape == PlanShape::SkipLayers;
    std::vector<UniformPair> pairs;
    for (size_t i = 0; i < choices.size(); ++i) {
      for (size_t j = 0; j < choices.size(); ++j) {
        if (joint && i != j) continue;
        const auto [kb, kd] = sideUniform(true, choices[i].key);
        const auto [vb, vd] = sideUniform(false, choices[j].value);
        if ((options.keyBudget && (std::isnan(kb) || std::isnan(kd))) ||
            (options.valueBudget && (std::isnan(vb) || std::isnan(vd)))) {
          continue;
        }
        UniformPair p;
        p.found = true;
        p.keySpec = options.keyBudget ? map.key.candidates[static_cast<size_t>(choices[i].key)].spec
                                      : toString(planOf(fixedSpecs(options.fixedKey)));
        p.valueSpec = options.valueBudget ? map.value.candidates[static_cast<size_t>(choices[j].value)].spec
                                          : toString(planOf(fixedSpecs(options.fixedValue)));
        const double kbits = options.keyBudget ? kb : fixedBits(options.fixedKey);
        const double vbits = options.valueBudget ? vb : fixedBits(options.fixedValue);
        p.bytesPerToken = (kbits + vbits) * perLayerElements * static_cast<double>(L) / 8;
        p.keyDamage = shown(options.keyBudget, kd);
        p.valueDamage = shown(options.valueBudget, vd);
        p.meets = (!options.keyBudget || options.keyBudget->meets(p.keyDamage)) &&
                  (!options.valueBudget || options.valueBudget->meets(p.valueDamage));
        pairs.push_back(p);
        if (!options.valueBudget) break;  // a fixed V: one pair per K
      }
    }
    auto better = [&](const UniformPair& a, const UniformPair& b) {  // for equal bytes
      if (a.meets != b.meets) return a.meets;
      if (a.keyDamage != b.keyDamage && options.keyBudget) return options.keyBudget->better(a.keyDamage, b.keyDamage);
      if (options.valueBudget) return options.valueBudget->better(a.valueDamage, b.valueDamage);
      return false;
    };
    for (const UniformPair& p : pairs) {
      if (!p.meets) continue;
      if (!r.uniform.found || p.bytesPerToken < r.uniform.bytesPerToken ||
          (p.bytesPerToken == r.uniform.bytesPerToken && better(p, r.uniform))) {
        r.uniform = p;
      }
    }
    if (r.found) {
      const double target = r.bytesPerToken * (1 - 1e-12);
      for (const UniformPair& p : pairs) {
        if (p.bytesPerToken < target) continue;
        if (!r.uniformAtBytes.found || p.bytesPerToken < r.uniformAtBytes.bytesPerToken ||
            (p.bytesPerToken == r.uniformAtBytes.bytesPerToken && better(p, r.uniformAtBytes))) {
          r.uniformAtBytes = p;
        }
      }
    }
  }
  return r;
}

Expected<PlanSearchResult> planSearch(const Dump& dump, const PlanSearchOptions& options, const Progress& progress) {
  const DumpInfo& info = dump.info();
  if (!options.keyBudget && !options.valueBudget) {
    return Status::invalidArgument("plan search: give --key-budget, --value-budget or both");
  }
  KVS_RETURN_IF_ERROR(validateFixedSides(info, options.keyBudget, options.fixedKey, options.valueBudget,
                                         options.fixedValue));
  auto cands = planCandidates(info, options);
  if (!cands) return cands.status();
  SensitivityOptions so;
  so.candidates = *cands;
  // One type for both sides (skip-layers engines): both are mapped (only budgeted sides constrain).
  const EngineDef* def = options.engine.empty() ? nullptr : findEngine(options.engine);
  const bool bothSides = def && def->planTypes != nullptr && def->planShape == PlanShape::SkipLayers;
  so.keys = options.keyBudget.has_value() || bothSides;
  so.values = options.valueBudget.has_value() || bothSides;
  so.sequence = options.sequence;
  so.lastQueries = options.lastQueries;
  const double mapShare = options.evaluateJoint ? 0.85 : 1.0;
  auto map = sensitivityMap(dump, so, [&](double f, std::string_view what) {
    return report(progress, f * mapShare, what);
  });
  if (!map) return map.status();
  auto result = planFromMap(*map, options);
  if (!result) return result.status();
  for (const std::string& n : map->notes) result->notes.push_back(n);
  if (result->found && options.evaluateJoint) {
    EvalOptions eo;
    eo.key = result->key;
    eo.value = result->value;
    eo.sequence = options.sequence;
    eo.lastQueries = options.lastQueries;
    auto report_ = evaluate(dump, eo, [&](double f, std::string_view) {
      return report(progress, mapShare + (1 - mapShare) * f, "plan search: joint evaluation");
    });
    if (!report_) return report_.status().withContext("plan search: joint evaluation");
    result->joint = std::move(*report_);
  }
  report(progress, 1.0, "plan search");
  return result;
}

// ---- Output ------------------------------------------------------------------------------------

namespace {

nlohmann::ordered_json num(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json uniformJson(const UniformPair& p) {
  if (!p.found) return nullptr;
  return {{"key_spec", p.keySpec},        {"value_spec", p.valueSpec},     {"bytes_per_token", num(p.bytesPerToken)},
          {"key_damage", num(p.keyDamage)}, {"value_damage", num(p.valueDamage)}, {"meets", p.meets}};
}

std::string g(double v, const char* f = "%.4g") {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

std::string planSearchToJson(const PlanSearchResult& r) {
  nlohmann::ordered_json j;
  j["kvscope_plan_search"] = 1;
  j["dump"] = r.dump.path;
  j["model"] = r.dump.model;
  j["engine"] = r.engine.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.engine);
  j["shape"] = planShapeName(r.shape);
  j["key_budget"] = r.keyBudget ? nlohmann::ordered_json(budgetText(*r.keyBudget)) : nlohmann::ordered_json(nullptr);
  j["value_budget"] = r.valueBudget ? nlohmann::ordered_json(budgetText(*r.valueBudget)) : nlohmann::ordered_json(nullptr);
  j["aggregate"] = "mean over layers of each layer's mean over kv heads (max for score_max, kl_max)";
  j["found"] = r.found;
  j["exact"] = r.exact;
  if (r.found) {
    j["key_plan"] = r.keyPlan;
    j["value_plan"] = r.valuePlan;
    j["key_bits_per_element"] = num(r.keyBits);
    j["value_bits_per_element"] = num(r.valueBits);
    j["key_damage"] = num(r.keyDamage);
    j["value_damage"] = num(r.valueDamage);
  }
  j["bytes_per_token"] = num(r.bytesPerToken);
  j["bytes_per_token_baseline"] = num(r.bytesPerTokenBaseline);
  auto layers = nlohmann::ordered_json::array();
  for (const PlanLayerChoice& c : r.layers) {
    layers.push_back({{"layer", c.layer},
                      {"key_spec", c.keySpec},
                      {"value_spec", c.valueSpec},
                      {"key_bits", num(c.keyBits)},
                      {"value_bits", num(c.valueBits)},
                      {"key_damage", num(c.keyDamage)},
                      {"value_damage", num(c.valueDamage)}});
  }
  j["layers"] = layers;
  j["uniform"] = uniformJson(r.uniform);
  j["uniform_at_bytes"] = uniformJson(r.uniformAtBytes);
  auto flags = nlohmann::ordered_json::array();
  for (const EngineFlags& f : r.engineFlags) {
    flags.push_back({{"engine", f.engine},
                     {"expressible", f.expressible},
                     {"flags", f.expressible ? nlohmann::ordered_json(f.flags) : nlohmann::ordered_json(nullptr)},
                     {"statement", f.statement}});
  }
  j["engine_flags"] = flags;
  j["joint"] = r.joint ? reportJson(*r.joint) : nlohmann::ordered_json(nullptr);
  j["notes"] = r.notes;
  return jsonText(j);
}

std::string planSearchToText(const PlanSearchResult& r) {
  std::ostringstream o;
  o << r.dump.path << ": plan search (" << planShapeName(r.shape);
  if (!r.engine.empty()) o << ", " << r.engine;
  o << ") over " << r.dump.layers << " layers\n";
  if (r.keyBudget) o << "key budget:   " << budgetText(*r.keyBudget) << " (key_only, mean over layers and kv heads)\n";
  if (r.valueBudget) o << "value budget: " << budgetText(*r.valueBudget) << " (value_only, mean over layers and kv heads)\n";
  if (!r.found) {
    o << "no plan found\n";
  } else {
    o << "\nkey plan:   " << r.keyPlan << "  (" << g(r.keyBits, "%.3f") << " bits/element";
    if (r.keyBudget) o << ", predicted " << attentionFieldName(r.keyBudget->field) << " " << g(r.keyDamage);
    o << ")\nvalue plan: " << r.valuePlan << "  (" << g(r.valueBits, "%.3f") << " bits/element";
    if (r.valueBudget) o << ", predicted " << attentionFieldName(r.valueBudget->field) << " " << g(r.valueDamage);
    o << ")\nbytes per token: " << g(r.bytesPerToken, "%.1f") << " (fp16 " << g(r.bytesPerTokenBaseline, "%.1f")
      << ")" << (r.exact ? "; cheapest plan of its shape (exact search)" : "; heuristic (state limit reached)")
      << "\n\nlayer  K spec                          V spec                          K bits  V bits  K damage    V damage\n";
    for (const PlanLayerChoice& c : r.layers) {
      char line[400];
      std::snprintf(line, sizeof line, "%5d  %-30s  %-30s  %6.3f  %6.3f  %-10s  %-10s\n", c.layer, c.keySpec.c_str(),
                    c.valueSpec.c_str(), c.keyBits, c.valueBits, g(c.keyDamage).c_str(), g(c.valueDamage).c_str());
      o << line;
    }
  }
  auto pair = [&](const char* label, const UniformPair& p) {
    if (!p.found) return;
    o << label << "K " << p.keySpec << ", V " << p.valueSpec << ": " << g(p.bytesPerToken, "%.1f")
      << " bytes/token, K " << g(p.keyDamage) << ", V " << g(p.valueDamage) << (p.meets ? " (meets)" : " (over budget)")
      << "\n";
  };
  o << "\n";
  if (r.uniform.found) pair("cheapest uniform within budget: ", r.uniform);
  else o << "no uniform pair of the candidates meets the budgets\n";
  pair("uniform at the plan's bytes or next larger: ", r.uniformAtBytes);
  if (!r.engineFlags.empty()) o << "\nengine flags\n";
  for (const EngineFlags& f : r.engineFlags) {
    o << "  " << f.engine << ": " << (f.expressible ? f.flags + "  (" + f.statement + ")" : f.statement) << "\n";
  }
  if (r.joint && r.joint->summary.attention) {
    const AttentionCases& a = *r.joint->summary.attention;
    o << "\njoint evaluation (eval of both plans, mean over layers and kv heads)\n"
      << "  key_only:   kl_mean " << g(a.keyOnly.klMean) << ", top1 " << g(a.keyOnly.top1Agreement)
      << ", output_rel_error " << g(a.keyOnly.outputRelError) << "\n"
      << "  value_only: output_rel_error " << g(a.valueOnly.outputRelError) << "\n"
      << "  joint:      kl_mean " << g(a.joint.klMean) << ", top1 " << g(a.joint.top1Agreement)
      << ", output_rel_error " << g(a.joint.outputRelError) << "\n";
  }
  for (const std::string& n : r.notes) o << "note: " << n << "\n";
  return o.str();
}

}  // namespace kvscope
