// The flag table: every option that the commands share (and every option of
// the run commands) is declared once in flags.cc, with its help group, help
// text, environment variable, the commands it serves and where its value goes
// in Flags. A command adds its own options (files, --out, -q, ...) and then
// add_flags(app, "run", flags); `mkevolve help CMD` is made from what was
// added, so help, defaults and validation cannot drift between commands.
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "eval/pool.h"
#include "run/run_env.h"
#include "search/search.h"

namespace mk::cli {

/// Where the LLM and the evaluator come from (run/run_env.h).
using run::EnvFlags;

/// Every value a table flag can set. Defaults are the members' own
/// (SearchOptions, EvalOptions, EnvFlags); help shows them.
struct Flags {
  EnvFlags env;
  search::SearchOptions search;  ///< .eval: the evaluator's settings
  std::vector<std::string> swap_with;  ///< run's --swap-with NAME=FILE
};

/// One option. `names` is CLI11's ("--trials", "-j,--jobs"); the long name
/// is the option's key and unique in the table.
struct FlagSpec {
  std::string names;
  std::string group;  ///< the help group; "" hides the option from help
  std::string help;
  std::string env;  ///< the environment variable used when the flag is absent ("" none; read where the value is resolved)
  std::vector<std::string> commands;  ///< the commands that take it
  /// Adds the option to app, bound to its member of flags.
  std::function<CLI::Option*(CLI::App& app, Flags& flags, const FlagSpec& self)> add;
  /// Sets this option's member of `to` from `from` (adapt: only what was given).
  std::function<void(const Flags& from, Flags& to)> copy;

  std::string long_name() const;  ///< "--trials"
  bool serves(const std::string& cmd) const;
};

/// The table, in help order: the groups appear in the order of their first
/// entry (Method, Budget, LLM, Machine, Evaluation).
const std::vector<FlagSpec>& flag_table();

/// The table entry named `long_name` ("--trials"); nullptr if none.
const FlagSpec* find_flag(const std::string& long_name);

/// Adds every table option that serves `cmd` to app, bound to flags, in
/// table order. Call it after the command's own options.
void add_flags(CLI::App& app, const std::string& cmd, Flags& flags);

/// For each table option of `group` that serves cmd and was given on the
/// command line of the parsed app: its value from `given` into *into.
/// (adapt: the earlier run's settings, overridden by what this command names.)
void take_given(const CLI::App& app, const std::string& cmd, const std::string& group, const Flags& given,
                Flags* into);

/// The worker pool's options from the Machine flags (python already
/// resolved): slots, prestart, --gpu, CPU test mode. The caller adds what is
/// its own: GPUs found, caches, work_dir, start_servers.
eval::PoolOptions pool_options(const EnvFlags& flags, const std::string& python);

}  // namespace mk::cli
