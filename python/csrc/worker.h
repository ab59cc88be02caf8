// One thread that runs posted tasks in order. Every call a backend makes on its
// communicator runs here, so all ranks issue operations in the order PyTorch
// asked for them, while the calling thread returns at once (async_op=True).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace braid_torch {

class Worker {
 public:
  using Task = std::function<void()>;

  Worker();
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // False once stop() was called: the task will never run.
  bool post(Task task);
  // Runs what is queued, then ends the thread. Idempotent. Called from the
  // worker thread itself (a task dropping the last reference to the owner), it
  // lets the thread finish on its own instead of joining itself.
  void stop();
  bool onWorkerThread() const { return std::this_thread::get_id() == threadId_; }

  // Waits until no task of any Worker in the process is queued or running and
  // every finished task has been destroyed (with what it held), or until
  // `seconds` passed; true when idle. Called at interpreter exit: a task
  // finishing after Python has begun to finalize could not take the GIL to
  // free the tensors it held, and the process would abort.
  static bool waitAllIdle(double seconds);

 private:
  // Shared with the thread, so that a detached thread never touches a destroyed Worker.
  struct Queue {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<Task> tasks;
    bool stopping = false;
  };
  static void loop(std::shared_ptr<Queue> q);

  std::shared_ptr<Queue> queue_;
  std::thread thread_;
  std::thread::id threadId_;
};

}  // namespace braid_torch
