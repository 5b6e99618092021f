#include "eval/proc.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

namespace mk::eval {

namespace {

struct ProcInfo {
  pid_t ppid = 0;
  char state = '?';
};

bool read_stat(pid_t pid, ProcInfo* info) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  if (!std::getline(in, s)) return false;
  // "pid (comm) S ppid ...": comm may contain spaces and parens; use the last ')'.
  auto close = s.rfind(')');
  if (close == std::string::npos || close + 2 >= s.size()) return false;
  std::istringstream rest(s.substr(close + 2));
  rest >> info->state >> info->ppid;
  return static_cast<bool>(rest);
}

std::vector<pid_t> all_pids() {
  std::vector<pid_t> pids;
  DIR* d = ::opendir("/proc");
  if (!d) return pids;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long v = std::strtol(e->d_name, &end, 10);
    if (end && *end == '\0' && v > 0) pids.push_back(static_cast<pid_t>(v));
  }
  ::closedir(d);
  return pids;
}

}  // namespace

bool process_alive(pid_t pid) {
  ProcInfo info;
  return read_stat(pid, &info) && info.state != 'Z' && info.state != 'X';
}

std::vector<pid_t> descendants_of(pid_t root) {
  std::map<pid_t, std::vector<pid_t>> children;
  std::map<pid_t, char> state;
  for (pid_t p : all_pids()) {
    ProcInfo info;
    if (!read_stat(p, &info)) continue;
    children[info.ppid].push_back(p);
    state[p] = info.state;
  }
  std::vector<pid_t> out, stack{root};
  std::set<pid_t> seen{root};
  while (!stack.empty()) {
    pid_t p = stack.back();
    stack.pop_back();
    for (pid_t c : children[p]) {
      if (!seen.insert(c).second) continue;
      stack.push_back(c);
      if (state[c] != 'Z' && state[c] != 'X') out.push_back(c);
    }
  }
  return out;
}

std::vector<pid_t> processes_with_token(const std::string& token) {
  std::vector<pid_t> out;
  if (token.empty()) return out;
  std::string needle = std::string(kTokenVar) + "=" + token;
  for (pid_t p : all_pids()) {
    std::ifstream in("/proc/" + std::to_string(p) + "/environ", std::ios::binary);
    if (!in) continue;
    std::string entry;
    while (std::getline(in, entry, '\0')) {
      if (entry == needle) {
        if (process_alive(p)) out.push_back(p);
        break;
      }
    }
  }
  return out;
}

int kill_process_tree(pid_t root, const std::string& token) {
  pid_t self = ::getpid();
  std::set<pid_t> signalled;
  auto hit = [&](pid_t p) {
    if (p <= 0 || p == self) return;
    ::kill(p, SIGKILL);
    signalled.insert(p);
  };
  if (root > 0 && root != self) {
    // Freeze the tree first so nothing forks while it is collected: once the
    // root dies its orphans are re-parented and can no longer be found by
    // parentage (the token still finds those that kept their environment).
    for (int pass = 0; pass < 3; ++pass)
      for (pid_t p : descendants_of(root))
        if (p != self) ::kill(p, SIGSTOP);
    std::vector<pid_t> tree = descendants_of(root);
    ::kill(-root, SIGKILL);
    hit(root);
    for (pid_t p : tree) hit(p);
  }
  for (int round = 0; round < 50; ++round) {
    std::set<pid_t> targets;
    if (root > 0 && root != self)
      for (pid_t p : descendants_of(root)) targets.insert(p);
    for (pid_t p : processes_with_token(token)) targets.insert(p);
    targets.erase(self);
    if (targets.empty()) break;
    for (pid_t p : targets) hit(p);
    ::usleep(round < 5 ? 2000 : 20000);
  }
  // SIGKILL is delivered asynchronously: wait (bounded) until every process
  // signalled is gone or a zombie, so the caller can rely on it.
  for (int i = 0; i < 500; ++i) {
    bool any = false;
    for (pid_t p : signalled)
      if (p != root && process_alive(p)) any = true;
    if (!any) break;
    ::usleep(2000);
  }
  return static_cast<int>(signalled.size());
}

std::string random_token() {
  std::random_device rd;
  std::ostringstream out;
  out << std::hex;
  for (int i = 0; i < 4; ++i) out << rd();
  return out.str();
}

}  // namespace mk::eval
