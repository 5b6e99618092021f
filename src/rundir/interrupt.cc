#include "rundir/interrupt.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>

namespace mk::rundir {

namespace {

std::atomic<int> g_signal{0};
std::atomic<int> g_count{0};
int g_pipe[2] = {-1, -1};
std::mutex g_mu;
bool g_installed = false;
struct sigaction g_old_int, g_old_term;

void handle(int sig) {
  int saved = errno;
  if (g_count.fetch_add(1) >= 1) {
    static const char msg[] = "\nmkevolve: interrupted again, exiting now\n";
    ssize_t ignored = ::write(2, msg, sizeof msg - 1);
    (void)ignored;
    ::_exit(130);
  }
  g_signal.store(sig);
  if (g_pipe[1] >= 0) {
    char c = 1;
    ssize_t ignored = ::write(g_pipe[1], &c, 1);
    (void)ignored;
  }
  errno = saved;
}

}  // namespace

void Interrupt::install() {
  std::lock_guard g(g_mu);
  if (g_installed) return;
  if (g_pipe[0] < 0 && ::pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) g_pipe[0] = g_pipe[1] = -1;
  struct sigaction sa {};
  sa.sa_handler = handle;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, &g_old_int);
  ::sigaction(SIGTERM, &sa, &g_old_term);
  g_installed = true;
}

void Interrupt::uninstall() {
  std::lock_guard g(g_mu);
  if (!g_installed) return;
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  g_installed = false;
}

bool Interrupt::requested() { return g_signal.load() != 0; }

int Interrupt::signal_number() { return g_signal.load(); }

int Interrupt::fd() { return g_pipe[0]; }

void Interrupt::reset() {
  g_signal.store(0);
  g_count.store(0);
  if (g_pipe[0] >= 0) {
    char buf[64];
    while (::read(g_pipe[0], buf, sizeof buf) > 0) {
    }
  }
}

void Interrupt::raise_for_test(int sig) { handle(sig); }

}  // namespace mk::rundir
