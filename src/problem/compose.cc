#include "problem/compose.h"

#include <unistd.h>

#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "util/fs.h"
#include "util/hash.h"

namespace mk::problem {

Result<std::string> rewrite_top_level_for_solution(const std::string& top_level) {
  auto imports = parse_top_imports(top_level);
  if (!imports) return Error{imports.error()};
  std::istringstream in(top_level);
  std::string line, out;
  int ln = 0;
  size_t next = 0;
  while (std::getline(in, line)) {
    ++ln;
    if (next < imports->size() && (*imports)[next].line == ln) {
      const auto& imp = (*imports)[next++];
      size_t indent = line.find_first_not_of(" \t");
      out += line.substr(0, indent == std::string::npos ? 0 : indent);
      out += fmt::format("from .subkernel_implementations.{} import ModelNew as {}\n", imp.module, imp.alias);
      continue;
    }
    out += line + "\n";
  }
  return out;
}

std::string pytorch_implementation(const Subproblem& sp) {
  return sp.source +
         "\n\n"
         "# Swap: this subkernel runs the PyTorch reference above. It passes the evaluator only\n"
         "# under the allow_pytorch policy, and the solution is marked as containing PyTorch.\n"
         "class ModelNew(Model):\n"
         "    pass\n";
}

namespace {

// solution/load_trained.py: from_trained(model, *init_args) -> ModelNew with a
// trained Model's parameters and buffers, paired by a verified mapping.
constexpr const char* kLoadTrained = R"PY("""Build ModelNew from a trained instance of the original Model.

    from solution.load_trained import from_trained
    fast = from_trained(trained_model, *init_args)   # the args Model was built with

The decomposition creates its parameters in the same order and with the same
random draws as the original Model. So a fresh Model and a fresh ModelNew,
both built under one seed, hold the same initial values: that pairs every
parameter (and buffer) of ModelNew with one of Model, by shape and value,
taking them in creation order where values tie (zero biases, unit norms).
The pairing must be one to one; otherwise from_trained raises and names the
first tensor it could not place. The trained values are then copied over,
and the result is moved to the trained model's device and put in its
train/eval mode.
"""

import torch

from .decomposed_solution import ModelNew

__all__ = ["from_trained", "TrainedWeightsError"]


class TrainedWeightsError(ValueError):
    """The trained Model's tensors do not map one to one onto ModelNew's."""


def _pair(kind, ref, new):
    """ref, new: lists of (name, tensor) from a fresh Model and a fresh ModelNew.
    Returns [(ref_name, new_name)], pairing each ref tensor with the first unused
    new tensor of the same shape and dtype and equal initial value."""
    if len(ref) != len(new):
        raise TrainedWeightsError(
            f"Model has {len(ref)} {kind}s but ModelNew has {len(new)}: "
            f"Model: {[n for n, _ in ref]}; ModelNew: {[n for n, _ in new]}")
    used = set()
    pairs = []
    for rname, rt in ref:
        match = None
        for j, (nname, nt) in enumerate(new):
            if j in used or nt.shape != rt.shape or nt.dtype != rt.dtype:
                continue
            if torch.equal(nt.detach().cpu(), rt.detach().cpu()):
                match = j
                break
        if match is None:
            shapes = [f"{n} {tuple(t.shape)}" for j, (n, t) in enumerate(new) if j not in used]
            raise TrainedWeightsError(
                f"Model {kind} '{rname}' {tuple(rt.shape)} has no counterpart in ModelNew with the same shape "
                f"and the same initial value (unplaced ModelNew {kind}s: {shapes})")
        used.add(match)
        pairs.append((rname, new[match][0]))
    return pairs


def mapping(model_cls, *init_args, seed=0, **init_kwargs):
    """{"parameters": [(Model name, ModelNew name)], "buffers": [...]}: the verified pairing."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        ref = model_cls(*init_args, **init_kwargs)
        torch.manual_seed(seed)
        new = ModelNew(*init_args, **init_kwargs)
    return {
        "parameters": _pair("parameter", list(ref.named_parameters()), list(new.named_parameters())),
        "buffers": _pair("buffer", list(ref.named_buffers()), list(new.named_buffers())),
    }, new


def from_trained(model, *init_args, seed=0, **init_kwargs):
    """A ModelNew holding model's parameters and buffers (model: a trained
    instance of the original Model; init_args: the arguments it was built with)."""
    pairs, new = mapping(type(model), *init_args, seed=seed, **init_kwargs)
    src_p = dict(model.named_parameters())
    src_b = dict(model.named_buffers())
    dst_p = dict(new.named_parameters())
    dst_b = dict(new.named_buffers())
    with torch.no_grad():
        for (rname, nname), src, dst in (
                [(p, src_p, dst_p) for p in pairs["parameters"]] + [(b, src_b, dst_b) for b in pairs["buffers"]]):
            if rname not in src:
                raise TrainedWeightsError(f"the trained model has no '{rname}' (was it built with other arguments?)")
            t = src[rname]
            if t.shape != dst[nname].shape:
                raise TrainedWeightsError(
                    f"the trained model's '{rname}' is {tuple(t.shape)}, but ModelNew's '{nname}' is "
                    f"{tuple(dst[nname].shape)} (was it built with other arguments?)")
            dst[nname].copy_(t.detach().to(dst[nname].device))
    device = next((t.device for t in list(model.parameters()) + list(model.buffers())), None)
    if device is not None:
        new = new.to(device)
    new.train(model.training)
    return new
)PY";

}  // namespace

Status check_composable(const Topology& topo, const std::map<std::string, std::string>& kernels) {
  for (const auto& sp : topo.subproblems) {
    if (!kernels.count(sp.name)) return Error{fmt::format("no kernel for subproblem {}", sp.name)};
  }
  auto top = rewrite_top_level_for_solution(topo.top_level);
  if (!top) return Error{top.error()};
  return Status::Ok();
}

Status write_solution_package(const fs::path& package_dir, const Topology& topo,
                              const std::map<std::string, std::string>& kernels,
                              const PackageContents& manifest, bool durable) {
  if (auto c = check_composable(topo, kernels); !c)
    return Error{fmt::format("cannot compose {}: {}", package_dir.string(), c.error())};
  auto top = rewrite_top_level_for_solution(topo.top_level);

  fs::path tmp = package_dir;
  tmp += fmt::format(".tmp-{}", ::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);

  records::SolutionManifest man = manifest.record;
  man.subkernels.clear();
  // null when the caller says it cannot be known (CPU test mode, where torch
  // stand-ins pass as kernels and nothing is profiled); else from the swaps.
  const bool pytorch_unknown = manifest.pytorch_unknown;
  man.contains_pytorch_subkernels =
      pytorch_unknown ? std::nullopt : std::optional<bool>(!manifest.pytorch_subkernels.empty());
  man.monolithic = topo.monolithic;

  auto w = [&](const fs::path& rel, const std::string& content) -> Status {
    return durable ? write_file_atomic(tmp / rel, content) : write_file_plain(tmp / rel, content);
  };
  Status st = w("__init__.py",
                "\"\"\"MKEvolve solution package. Import ModelNew from .decomposed_solution; each subkernel is a\n"
                "self-contained ModelNew in subkernel_implementations/, its PyTorch reference in\n"
                "subkernel_problems/. To use a trained Model's weights:\n"
                "from solution.load_trained import from_trained; fast = from_trained(model, *init_args).\"\"\"\n");
  if (st) st = w("load_trained.py", kLoadTrained);
  if (st) st = w("decomposed_solution.py", *top);
  if (st) st = w("subkernel_implementations/__init__.py", "");
  if (st) st = w("subkernel_problems/__init__.py", "");
  for (const auto& sp : topo.subproblems) {
    const std::string& k = kernels.at(sp.name);
    if (st) st = w("subkernel_implementations/" + sp.name + ".py", k);
    if (st) st = w("subkernel_problems/" + sp.name + ".py", sp.source);
    records::ManifestSubkernel entry;
    entry.name = sp.name;
    entry.problem_hash = sp.hash;
    entry.kernel_hash = sha256_hex(k);
    if (!pytorch_unknown) entry.pytorch = manifest.pytorch_subkernels.count(sp.name) > 0;
    if (auto r = manifest.reused_from.find(sp.name); r != manifest.reused_from.end()) entry.reused_from = r->second;
    man.subkernels.push_back(std::move(entry));
  }
  if (st) st = w("manifest.json", man.to_json().dump(2) + "\n");
  if (!st) {
    fs::remove_all(tmp, ec);
    return st;
  }
  fs::remove_all(package_dir, ec);
  fs::create_directories(package_dir.parent_path(), ec);
  fs::rename(tmp, package_dir, ec);
  if (ec) return Error{fmt::format("cannot move {} into place: {}", package_dir.string(), ec.message())};
  return Status::Ok();
}

}  // namespace mk::problem
