#include "worker.h"

#include <chrono>
#include <cstdio>

namespace braid_torch {

namespace {

// Tasks posted to any Worker and not yet destroyed.
struct Busy {
  std::mutex mutex;
  std::condition_variable cv;
  int64_t count = 0;
};

Busy& busy() {
  static Busy* b = new Busy;  // never destroyed: worker threads may outlive static destructors
  return *b;
}

void taskDone() {
  Busy& b = busy();
  std::lock_guard<std::mutex> lock(b.mutex);
  if (--b.count == 0) b.cv.notify_all();
}

}  // namespace

bool Worker::waitAllIdle(double seconds) {
  Busy& b = busy();
  std::unique_lock<std::mutex> lock(b.mutex);
  return b.cv.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return b.count == 0; });
}

Worker::Worker() : queue_(std::make_shared<Queue>()), thread_(&Worker::loop, queue_) {
  threadId_ = thread_.get_id();
}

Worker::~Worker() { stop(); }

bool Worker::post(Task task) {
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    if (queue_->stopping) return false;
    queue_->tasks.push_back(std::move(task));
    std::lock_guard<std::mutex> count(busy().mutex);
    ++busy().count;
  }
  queue_->cv.notify_one();
  return true;
}

void Worker::stop() {
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    queue_->stopping = true;
  }
  queue_->cv.notify_one();
  if (!thread_.joinable()) return;
  if (onWorkerThread()) thread_.detach();
  else thread_.join();
}

void Worker::loop(std::shared_ptr<Queue> q) {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(q->mutex);
      q->cv.wait(lock, [&] { return q->stopping || !q->tasks.empty(); });
      if (q->tasks.empty()) return;
      task = std::move(q->tasks.front());
      q->tasks.pop_front();
    }
    // A task reports its failure through its Work; one that escapes anyway
    // must not end the process (std::terminate) with every rank's job.
    try {
      task();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "braid_torch: a worker task failed outside its Work: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "braid_torch: a worker task failed outside its Work\n");
    }
    task = Task();  // what the task captured goes now, before it counts as done
    taskDone();
  }
}

}  // namespace braid_torch
