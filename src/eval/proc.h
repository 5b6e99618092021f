// Finding and killing every process a worker server left behind, including
// ones that called setsid() or were orphaned: by parentage (/proc/*/stat) and
// by a token in their environment (MKEVOLVE_WORKER_TOKEN, inherited by every
// descendant that does not rebuild its environment).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace mk::eval {

inline constexpr const char* kTokenVar = "MKEVOLVE_WORKER_TOKEN";

/// Live (non-zombie) descendants of root, root excluded.
std::vector<pid_t> descendants_of(pid_t root);

/// Live processes whose environment holds MKEVOLVE_WORKER_TOKEN=token.
std::vector<pid_t> processes_with_token(const std::string& token);

/// SIGKILLs root's process group, root, its descendants and every process
/// carrying token, repeating until none is left alive (bounded rounds).
/// Never signals the calling process. Returns how many processes it signalled.
int kill_process_tree(pid_t root, const std::string& token);

/// A fresh random token (hex).
std::string random_token();

/// True when the process exists and is not a zombie.
bool process_alive(pid_t pid);

}  // namespace mk::eval
