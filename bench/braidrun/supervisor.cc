#include "braidrun/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace braid::run {
namespace {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void writeAll(int fd, const char* data, size_t len) {
  while (len > 0) {
    const ssize_t n = write(fd, data, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // reader gone: drop the output, keep supervising
    data += n;
    len -= static_cast<size_t>(n);
  }
}

std::string describeStatus(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "stopped with wait status " + std::to_string(status);
}

int exitCodeFor(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// One output stream of one rank, in --tag-output mode.
struct Stream {
  UniqueFd fd;
  int target;  // STDOUT_FILENO or STDERR_FILENO
  std::string partial;
};

struct Child {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  Stream out{UniqueFd(), STDOUT_FILENO, {}};
  Stream err{UniqueFd(), STDERR_FILENO, {}};
};

class Supervisor {
 public:
  explicit Supervisor(const JobSpec& job) : job_(job), children_(job.env.size()) {}

  int run() {
    if (!blockSignals()) return 1;
    if (!startAll()) {
      stopAll(SIGKILL);
      while (running() > 0) reapBlocking();
      restoreSignals();
      return 1;
    }
    loop();
    restoreSignals();
    if (failedRank_ >= 0) return exitCodeFor(failedStatus_);
    if (interruptSignal_) return 128 + interruptSignal_;
    return 0;
  }

 private:
  bool blockSignals() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
    if (sigprocmask(SIG_BLOCK, &set, &oldMask_) != 0) return report("sigprocmask", errno);
    sigFd_.reset(signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
    if (sigFd_.get() < 0) return report("signalfd", errno);
    // A closed stdout must not kill the launcher while ranks still run.
    signal(SIGPIPE, SIG_IGN);
    return true;
  }

  void restoreSignals() {
    sigprocmask(SIG_SETMASK, &oldMask_, nullptr);
    signal(SIGPIPE, SIG_DFL);
  }

  bool report(const char* what, int err) {
    std::fprintf(stderr, "braidrun: %s failed: %s\n", what, std::strerror(err));
    return false;
  }

  // Everything a child needs, prepared before fork so the child only execs.
  struct Launch {
    std::vector<char*> argv;
    std::vector<char*> envp;
  };

  bool startAll() {
    std::vector<std::string> argvStore = job_.argv;
    for (size_t r = 0; r < children_.size(); ++r) {
      Child& c = children_[r];
      c.rank = static_cast<int>(r);
      int outPipe[2] = {-1, -1}, errPipe[2] = {-1, -1};
      if (job_.tagOutput) {
        if (pipe2(outPipe, O_CLOEXEC) != 0) return report("pipe", errno);
        if (pipe2(errPipe, O_CLOEXEC) != 0) {
          close(outPipe[0]);
          close(outPipe[1]);
          return report("pipe", errno);
        }
      }
      std::vector<std::string> envStore = job_.env[r];
      Launch launch;
      for (std::string& a : argvStore) launch.argv.push_back(a.data());
      launch.argv.push_back(nullptr);
      for (std::string& e : envStore) launch.envp.push_back(e.data());
      launch.envp.push_back(nullptr);

      const pid_t pid = fork();
      if (pid < 0) {
        for (int fd : {outPipe[0], outPipe[1], errPipe[0], errPipe[1]})
          if (fd >= 0) close(fd);
        return report("fork", errno);
      }
      if (pid == 0) execChild(c.rank, launch, outPipe[1], errPipe[1]);
      setpgid(pid, pid);  // also done by the child: whichever runs first wins the race
      c.pid = pid;
      c.running = true;
      if (job_.tagOutput) {
        close(outPipe[1]);
        close(errPipe[1]);
        c.out.fd.reset(outPipe[0]);
        c.err.fd.reset(errPipe[0]);
      }
    }
    return true;
  }

  [[noreturn]] void execChild(int rank, const Launch& launch, int outFd, int errFd) {
    // Own process group: stopping a rank also stops what it started.
    setpgid(0, 0);
    signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_SETMASK, &oldMask_, nullptr);
    if (outFd >= 0) dup2(outFd, STDOUT_FILENO);
    if (errFd >= 0) dup2(errFd, STDERR_FILENO);
    execvpe(launch.argv[0], launch.argv.data(), launch.envp.data());
    const int err = errno;
    dprintf(STDERR_FILENO, "braidrun: cannot start '%s' for rank %d: %s\n", launch.argv[0], rank,
            std::strerror(err));
    _exit(127);
  }

  int running() const {
    return static_cast<int>(std::count_if(children_.begin(), children_.end(), [](const Child& c) { return c.running; }));
  }

  void stopAll(int sig) {
    for (const Child& c : children_)
      if (c.running) kill(-c.pid, sig);
  }

  void startStopping(int sig) {
    stopAll(sig);
    if (deadline_ == 0) deadline_ = nowSeconds() + job_.graceSeconds;
  }

  void onExit(pid_t pid, int status) {
    for (Child& c : children_) {
      if (c.pid != pid || !c.running) continue;
      c.running = false;
      const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      // Once stopping has begun, later deaths are our doing, not failures.
      if (failed && failedRank_ < 0 && !interruptSignal_) {
        failedRank_ = c.rank;
        failedStatus_ = status;
        const int others = running();
        std::fprintf(stderr, "braidrun: rank %d (pid %d) %s%s\n", c.rank, static_cast<int>(pid),
                     describeStatus(status).c_str(),
                     others ? ("; stopping the other " + std::to_string(others) + " rank(s)").c_str() : "");
        startStopping(SIGTERM);
      }
      return;
    }
  }

  void reapAll() {
    for (;;) {
      int status = 0;
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      onExit(pid, status);
    }
  }

  void reapBlocking() {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid > 0) onExit(pid, status);
    if (pid < 0 && errno == ECHILD)
      for (Child& c : children_) c.running = false;
  }

  void onSignal(int sig) {
    if (sig == SIGCHLD) {
      reapAll();
      return;
    }
    if (interruptSignal_ || failedRank_ >= 0) {
      std::fprintf(stderr, "braidrun: signal %d again: killing all ranks\n", sig);
      stopAll(SIGKILL);
      return;
    }
    interruptSignal_ = sig;
    std::fprintf(stderr, "braidrun: got signal %d (%s): forwarding it to %d rank(s)\n", sig, strsignal(sig),
                 running());
    startStopping(sig);
  }

  void drainSignals() {
    signalfd_siginfo info;
    while (read(sigFd_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info))
      onSignal(static_cast<int>(info.ssi_signo));
  }

  void emitLines(int rank, Stream& s, bool flushPartial) {
    size_t start = 0;
    const std::string prefix = "[" + std::to_string(rank) + "] ";
    for (;;) {
      const size_t nl = s.partial.find('\n', start);
      if (nl == std::string::npos) break;
      const std::string line = prefix + s.partial.substr(start, nl - start + 1);
      writeAll(s.target, line.data(), line.size());
      start = nl + 1;
    }
    s.partial.erase(0, start);
    if (flushPartial && !s.partial.empty()) {
      const std::string line = prefix + s.partial + "\n";
      writeAll(s.target, line.data(), line.size());
      s.partial.clear();
    }
  }

  void pump(int rank, Stream& s) {
    char buf[65536];
    const ssize_t n = read(s.fd.get(), buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      emitLines(rank, s, true);
      s.fd.reset();
      return;
    }
    s.partial.append(buf, static_cast<size_t>(n));
    emitLines(rank, s, false);
  }

  void loop() {
    for (;;) {
      const int alive = running();
      std::vector<pollfd> fds{{sigFd_.get(), POLLIN, 0}};
      std::vector<Stream*> streams{nullptr};
      std::vector<int> ranks{-1};
      for (Child& c : children_) {
        for (Stream* s : {&c.out, &c.err}) {
          if (s->fd.get() < 0) continue;
          fds.push_back({s->fd.get(), POLLIN, 0});
          streams.push_back(s);
          ranks.push_back(c.rank);
        }
      }
      if (alive == 0 && fds.size() == 1) return;

      int timeoutMs = -1;
      if (deadline_ > 0) timeoutMs = std::max(0, static_cast<int>((deadline_ - nowSeconds()) * 1000) + 1);
      // Every rank is gone: collect the last output, but do not wait for
      // grandchildren that keep a pipe open.
      if (alive == 0) timeoutMs = 200;

      const int ready = poll(fds.data(), fds.size(), timeoutMs);
      if (ready < 0 && errno != EINTR) {
        report("poll", errno);
        return;
      }
      if (ready == 0 && alive == 0) {
        for (size_t i = 1; i < fds.size(); ++i) emitLines(ranks[i], *streams[i], true);
        return;
      }
      if (ready > 0) {
        if (fds[0].revents) drainSignals();
        for (size_t i = 1; i < fds.size(); ++i)
          if (fds[i].revents) pump(ranks[i], *streams[i]);
      }
      if (deadline_ > 0 && nowSeconds() >= deadline_) {
        for (const Child& c : children_)
          if (c.running)
            std::fprintf(stderr, "braidrun: rank %d (pid %d) still running %.1f s after being asked to stop: "
                         "killing it\n", c.rank, static_cast<int>(c.pid), job_.graceSeconds);
        stopAll(SIGKILL);
        deadline_ = 0;
      }
    }
  }

  const JobSpec& job_;
  std::vector<Child> children_;
  UniqueFd sigFd_;
  sigset_t oldMask_{};
  double deadline_ = 0;  // when SIGKILL follows the polite signal; 0: none pending
  int failedRank_ = -1;
  int failedStatus_ = 0;
  int interruptSignal_ = 0;
};

}  // namespace

int runJob(const JobSpec& job) {
  Supervisor s(job);
  return s.run();
}

}  // namespace braid::run
