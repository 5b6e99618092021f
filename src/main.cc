// mkevolve: turns PyTorch modules into verified, modular Triton kernels.
// Dispatches to the subcommands registered in src/cli/.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/help.h"
#include "cli/registry.h"
#include "util/fs.h"
#include "util/strings.h"

namespace mk::cli {

namespace {
void usage(FILE* out) {
  std::fprintf(out,
               "usage: mkevolve <command> [options]   (mkevolve help <command> for its options)\n\n"
               "MKEvolve turns a PyTorch module (KernelBench format) into a modular package of\n"
               "verified Triton kernels, using an LLM to decompose, write and evolve them.\n\ncommands:\n");
  auto cmds = commands();
  std::sort(cmds.begin(), cmds.end(), [](const Command& a, const Command& b) { return a.name < b.name; });
  for (const auto& c : cmds) {
    std::string head = "  " + c.name;
    head.resize(17, ' ');
    std::fputs(wrap_text(c.summary, kHelpWidth, head, std::string(17, ' ')).c_str(), out);
  }
  std::fprintf(out, "\nmkevolve help COMMAND prints a command's options, examples and exit statuses;\n"
                   "mkevolve --version (-V, version) prints the version.\n");
}
}  // namespace

}  // namespace mk::cli

int main(int argc, char** argv) {
  using namespace mk::cli;
  // `mkevolve help CMD` is `mkevolve CMD --help`.
  std::vector<char*> help_args;
  std::string help_flag = "--help";
  if (argc >= 3 && !std::strcmp(argv[1], "help")) {
    help_args = {argv[0], argv[2], help_flag.data(), nullptr};
    argc = 3;
    argv = help_args.data();
  }
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? kExitUsage : kExitOk;
  }
  if (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "-V") || !std::strcmp(argv[1], "version")) {
    std::printf("mkevolve %s\nfiles: %s\n", MKEVOLVE_VERSION, mk::install_root().string().c_str());
    return kExitOk;
  }
  std::string name = argv[1];
  for (const auto& c : commands()) {
    if (c.name == name) {
      std::string prog = "mkevolve " + name;
      std::vector<char*> args;
      args.push_back(prog.data());
      for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
      args.push_back(nullptr);
      return c.fn(static_cast<int>(args.size() - 1), args.data());
    }
  }
  std::vector<std::string> names;
  for (const auto& c : commands()) names.push_back(c.name);
  const std::string best = mk::nearest(name, names);
  std::fprintf(stderr, "mkevolve: unknown command '%s'", name.c_str());
  if (!best.empty()) std::fprintf(stderr, ", did you mean '%s'?", best.c_str());
  std::fprintf(stderr, "\nRun 'mkevolve --help' for the list of commands.\n");
  return kExitUsage;
}
