// specdec/detail/model/thread_pool.hpp — a persistent fork-join pool for the model's parallel loops.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/error.hpp"

namespace specdec {

namespace detail {

/// One spin-wait step: tells the core we are spinning (frees the sibling hyperthread, saves power).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

/// Waits until `a != old` and returns the new value: spins for about `spin` first (decode calls the
/// pool every 10-100 us, and a futex wake-up costs several us), then sleeps in `atomic::wait`.
/// `sleepers` counts threads that may be asleep on `a`, so that the publisher can skip the
/// notify syscall when nobody sleeps (Dekker-style: both sides use seq_cst).
inline std::uint32_t wait_for_change(const std::atomic<std::uint32_t>& a, std::uint32_t old,
                                     std::atomic<int>& sleepers, std::chrono::microseconds spin) {
    std::uint32_t v = a.load(std::memory_order_acquire);
    if (v != old) return v;
    const auto deadline = std::chrono::steady_clock::now() + spin;
    for (int i = 1;; ++i) {
        cpu_relax();
        v = a.load(std::memory_order_acquire);
        if (v != old) return v;
        // Every ~64 spins: read the clock (~20 ns), and yield, so that when threads outnumber
        // cores (or the machine is shared) a spinner gives way to the thread it is waiting for.
        if ((i & 63) == 0) {
            if (std::chrono::steady_clock::now() > deadline) break;
            std::this_thread::yield();
        }
    }
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    while ((v = a.load(std::memory_order_seq_cst)) == old) a.wait(old, std::memory_order_seq_cst);
    sleepers.fetch_sub(1, std::memory_order_relaxed);
    return v;
}

}  // namespace detail

/// A fixed set of worker threads that run `parallel_for` loops together with the calling thread.
///
/// `parallel_for(n_tasks, f)` calls `f(task)` once for every task in [0, n_tasks), on any thread of
/// the pool, and returns when all calls have returned. Tasks are claimed one at a time from a shared
/// counter, so uneven tasks balance themselves, and the caller waits for tasks, not for workers: a
/// worker the OS has not scheduled yet simply finds nothing left to do. If a task throws, tasks not
/// yet started are skipped and the first exception is rethrown in the caller.
///
/// Workers spin for `kSpin` after each loop before they sleep, so back-to-back loops (a decode
/// step calls ~7 per layer) start in well under a microsecond. A pool of size 1 runs loops inline.
/// A `parallel_for` issued while the pool is busy (from inside a task, or from a second thread)
/// runs inline on its caller instead of deadlocking.
class ThreadPool {
public:
    /// `n_threads` counts the calling thread; 0 means `std::thread::hardware_concurrency()`.
    explicit ThreadPool(int n_threads = 0) {
        if (n_threads < 0)
            detail::fail("thread_pool", "n_threads = " + std::to_string(n_threads) + ", expected >= 0");
        if (n_threads == 0) n_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
        n_threads_ = n_threads;
        workers_.reserve(static_cast<std::size_t>(n_threads - 1));
        for (int t = 1; t < n_threads; ++t) workers_.emplace_back([this] { worker_loop(); });
    }

    ~ThreadPool() {
        stop_.store(true, std::memory_order_relaxed);
        generation_.fetch_add(1, std::memory_order_seq_cst);
        generation_.notify_all();
        for (auto& w : workers_) w.join();
    }

    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    /// Calls `f(task)` for every task in [0, n_tasks); blocks until all are done.
    template <class F>
    void parallel_for(int n_tasks, F&& f) {
        if (n_tasks <= 0) return;
        bool expected = false;
        if (n_threads_ == 1 || n_tasks == 1 || !busy_.compare_exchange_strong(expected, true)) {
            for (int t = 0; t < n_tasks; ++t) f(t);
            return;
        }
        // A worker still inside the previous loop (it saw the job open, then found no task) may be
        // reading the job fields; wait for it to leave before overwriting them.
        while (inside_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();

        using Fn = std::remove_reference_t<F>;
        job_ = static_cast<const void*>(&f);
        call_ = [](const void* job, int task) { (*static_cast<Fn*>(const_cast<void*>(job)))(task); };
        n_tasks_ = n_tasks;
        next_task_.store(0, std::memory_order_relaxed);
        n_done_.store(0, std::memory_order_relaxed);
        failed_.store(false, std::memory_order_relaxed);
        error_ = nullptr;
        // Publishes the job: workers read its fields only after they see it open.
        open_.store(true, std::memory_order_seq_cst);
        generation_.fetch_add(1, std::memory_order_seq_cst);
        if (worker_sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();

        run_tasks();

        const auto n = static_cast<std::uint32_t>(n_tasks);
        for (std::uint32_t done = n_done_.load(std::memory_order_acquire); done != n;
             done = n_done_.load(std::memory_order_acquire))
            detail::wait_for_change(n_done_, done, caller_sleepers_, kSpin);
        open_.store(false, std::memory_order_seq_cst);
        std::exception_ptr error = std::move(error_);
        error_ = nullptr;
        busy_.store(false, std::memory_order_release);
        if (error) std::rethrow_exception(error);
    }

private:
    static constexpr std::chrono::microseconds kSpin{200};

    /// Claims and runs tasks until none is left; every claimed task counts as done, run or skipped.
    void run_tasks() {
        for (;;) {
            const int t = next_task_.fetch_add(1, std::memory_order_relaxed);
            if (t >= n_tasks_) return;
            if (!failed_.load(std::memory_order_relaxed)) {
                try {
                    call_(job_, t);
                } catch (...) {
                    std::lock_guard<std::mutex> lock(error_mutex_);
                    if (!error_) error_ = std::current_exception();
                    failed_.store(true, std::memory_order_relaxed);
                }
            }
            // seq_cst pairs with the caller's increment of caller_sleepers_ before it sleeps.
            const auto done = n_done_.fetch_add(1, std::memory_order_seq_cst) + 1;
            if (done == static_cast<std::uint32_t>(n_tasks_) && caller_sleepers_.load(std::memory_order_seq_cst) > 0)
                n_done_.notify_one();
        }
    }

    void worker_loop() {
        // Not generation_.load(): a loop may have been published before this thread got here.
        std::uint32_t seen = 0;
        for (;;) {
            seen = detail::wait_for_change(generation_, seen, worker_sleepers_, kSpin);
            if (stop_.load(std::memory_order_relaxed)) return;
            // Dekker with the caller: it closes the job, then waits for inside_ == 0; we enter, then
            // check that the job is open. Either it waits for us or we touch nothing.
            inside_.fetch_add(1, std::memory_order_seq_cst);
            if (open_.load(std::memory_order_seq_cst)) run_tasks();
            inside_.fetch_sub(1, std::memory_order_seq_cst);
        }
    }

    int n_threads_ = 1;
    std::vector<std::thread> workers_;

    // The current job; written by the caller only while it is closed and no worker is inside.
    const void* job_ = nullptr;
    void (*call_)(const void*, int) = nullptr;
    int n_tasks_ = 0;
    std::exception_ptr error_;
    std::mutex error_mutex_;

    // Hot counters on their own cache lines: workers hammer next_task_ and n_done_ while the caller
    // spins on n_done_ and idle workers spin on generation_.
    alignas(64) std::atomic<std::uint32_t> generation_{0};
    alignas(64) std::atomic<int> next_task_{0};
    alignas(64) std::atomic<std::uint32_t> n_done_{0};
    alignas(64) std::atomic<int> inside_{0};
    std::atomic<bool> open_{false};
    std::atomic<int> worker_sleepers_{0};
    std::atomic<int> caller_sleepers_{0};
    std::atomic<bool> failed_{false};
    std::atomic<bool> stop_{false};
    std::atomic<bool> busy_{false};
};

}  // namespace specdec
