// specdec/detail/model/huge_pages.hpp — an allocator that backs large buffers with 2 MiB pages where Linux allows.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

// Why: a decode step streams every weight once, and a head's attention reads one short segment of
// each cached row, rows kvd floats apart. With 4 KiB pages both pay a TLB miss every few cache lines
// and the hardware prefetchers stop at each page boundary. Buffers of 2 MiB or more are therefore
// aligned to 2 MiB and offered to the kernel as transparent huge pages (madvise: the setting most
// distributions ship). Where the kernel declines, the memory is ordinary and everything still works.

namespace specdec {

constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

/// std::allocator's contract; buffers of at least kHugePageBytes are 2 MiB-aligned and advised
/// MADV_HUGEPAGE (Linux), smaller ones come from operator new.
template <class T>
struct HugePageAllocator {
    using value_type = T;

    HugePageAllocator() = default;
    template <class U>
    HugePageAllocator(const HugePageAllocator<U>&) noexcept {}

    T* allocate(std::size_t count) {
        if (count > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
        const std::size_t bytes = count * sizeof(T);
        if (bytes < kHugePageBytes) return static_cast<T*>(::operator new(bytes, std::align_val_t{64}));
        const std::size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
        void* p = std::aligned_alloc(kHugePageBytes, rounded);
        if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
        madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure leaves ordinary pages
#endif
        return static_cast<T*>(p);
    }

    void deallocate(T* p, std::size_t count) noexcept {
        if (count * sizeof(T) < kHugePageBytes) ::operator delete(p, std::align_val_t{64});
        else std::free(p);
    }

    template <class U>
    bool operator==(const HugePageAllocator<U>&) const noexcept {
        return true;
    }
};

/// A vector whose large buffers sit on huge pages.
template <class T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

/// HugePageAllocator whose resize() leaves elements of implicit-lifetime types (numbers, bf16)
/// unwritten, for a buffer that a parallel loop then fills whole: zeroing it first would be a second
/// pass over it, on one thread, and would first-touch every page from that thread.
template <class T>
struct UninitializedHugePageAllocator : HugePageAllocator<T> {
    template <class U>
    struct rebind {
        using other = UninitializedHugePageAllocator<U>;
    };
    UninitializedHugePageAllocator() = default;
    template <class U>
    UninitializedHugePageAllocator(const UninitializedHugePageAllocator<U>&) noexcept {}

    template <class U, class... Args>
    void construct(U* p, Args&&... args) {
        if constexpr (sizeof...(Args) == 0 && std::is_trivially_copyable_v<U> && std::is_trivially_destructible_v<U>) return;
        else ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
};

template <class T>
using UninitializedHugeVector = std::vector<T, UninitializedHugePageAllocator<T>>;

}  // namespace specdec
