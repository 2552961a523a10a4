// specdec/detail/cuda/context.cuh — what CUDA work runs on: the error check, RAII device and pinned
// buffers, and the CudaContext (stream, cuBLASLt handle, its workspace) that the caller owns.
// SPDX-License-Identifier: MIT
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <span>
#include <string>
#include <utility>

#include "../core/error.hpp"

namespace specdec {

namespace detail {

[[noreturn]] inline void cuda_fail(const char* expr, const char* file, int line, const std::string& why) {
    fail("cuda", std::string(expr) + " failed at " + file + ":" + std::to_string(line) + ": " + why);
}

inline void cuda_check(cudaError_t status, const char* expr, const char* file, int line) {
    if (status != cudaSuccess)
        cuda_fail(expr, file, line, std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")");
}

inline void cuda_check(cublasStatus_t status, const char* expr, const char* file, int line) {
    if (status != CUBLAS_STATUS_SUCCESS)
        cuda_fail(expr, file, line,
                  std::string(cublasLtGetStatusName(status)) + " (" + cublasLtGetStatusString(status) + ")");
}

}  // namespace detail

/// Checks a CUDA runtime or cuBLASLt status; on failure throws specdec::error
/// "[specdec.cuda] <expression> failed at <file>:<line>: <status name> (<description>)".
/// A macro only because it records the expression, file and line.
#define SPECDEC_CUDA_CHECK(expr) ::specdec::detail::cuda_check((expr), #expr, __FILE__, __LINE__)

// ---------------------------------------------------------------------------------------------------
// Buffers

enum class Memory {
    kDevice,      // cudaMalloc: what kernels read and write
    kPinnedHost,  // cudaMallocHost: page-locked, so copies are asynchronous and CUDA graphs may capture them
};

/// An owned array of `count` T in device or pinned host memory; movable, not copyable. Allocation
/// failures throw; the destructor ignores errors (it cannot throw, and a failed free leaks nothing
/// that outlives the process).
template <class T, Memory where = Memory::kDevice>
class CudaBuffer {
public:
    CudaBuffer() = default;
    explicit CudaBuffer(std::size_t count) : count_(count) {
        if (count_ == 0) return;
        void* p = nullptr;
        if constexpr (where == Memory::kDevice) SPECDEC_CUDA_CHECK(cudaMalloc(&p, bytes()));
        else SPECDEC_CUDA_CHECK(cudaMallocHost(&p, bytes()));
        ptr_ = static_cast<T*>(p);
    }
    CudaBuffer(CudaBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
    CudaBuffer& operator=(CudaBuffer&& o) noexcept {
        std::swap(ptr_, o.ptr_);
        std::swap(count_, o.count_);
        return *this;
    }
    CudaBuffer(const CudaBuffer&) = delete;
    CudaBuffer& operator=(const CudaBuffer&) = delete;
    ~CudaBuffer() {
        if (ptr_ == nullptr) return;
        if constexpr (where == Memory::kDevice) cudaFree(ptr_);
        else cudaFreeHost(ptr_);
    }

    T* get() { return ptr_; }
    const T* get() const { return ptr_; }
    std::size_t size() const { return count_; }
    std::size_t bytes() const { return count_ * sizeof(T); }
    bool empty() const { return count_ == 0; }

private:
    T* ptr_ = nullptr;
    std::size_t count_ = 0;
};

template <class T>
using DeviceBuffer = CudaBuffer<T, Memory::kDevice>;
template <class T>
using PinnedBuffer = CudaBuffer<T, Memory::kPinnedHost>;

/// Copies host values into a new device buffer (synchronously: for set-up, not for the decode loop).
template <class T>
DeviceBuffer<T> to_device(std::span<const T> host) {
    DeviceBuffer<T> d(host.size());
    if (!host.empty()) {
        SPECDEC_CUDA_CHECK(cudaMemcpy(d.get(), host.data(), d.bytes(), cudaMemcpyHostToDevice));
        // From pageable memory cudaMemcpy may return before its DMA lands, on the legacy stream, which the
        // context's non-blocking stream does not wait for: finish it before any kernel reads d.
        SPECDEC_CUDA_CHECK(cudaDeviceSynchronize());
    }
    return d;
}

// ---------------------------------------------------------------------------------------------------
// The context

/// What a CUDA model runs on, created by the caller and passed to every model that shares it (no
/// globals): one device, one non-blocking stream on which all work is ordered, and one cuBLASLt handle
/// with its workspace. Work from several models on one context is serialised on its stream.
class CudaContext {
public:
    /// 32 MiB of cuBLASLt workspace is what llm.c gives Hopper's split-K kernels.
    explicit CudaContext(int device = 0, std::size_t workspace_bytes = std::size_t{32} << 20) : device_(device) {
        try {
            SPECDEC_CUDA_CHECK(cudaSetDevice(device_));
            SPECDEC_CUDA_CHECK(cudaGetDeviceProperties(&props_, device_));
            SPECDEC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
            SPECDEC_CUDA_CHECK(cublasLtCreate(&blas_));
            workspace_ = DeviceBuffer<std::byte>(workspace_bytes);
        } catch (...) {
            release();
            throw;
        }
    }
    CudaContext(const CudaContext&) = delete;
    CudaContext& operator=(const CudaContext&) = delete;
    ~CudaContext() { release(); }

    int device() const { return device_; }
    const cudaDeviceProp& properties() const { return props_; }
    cudaStream_t stream() const { return stream_; }
    cublasLtHandle_t blas() const { return blas_; }
    void* workspace() { return workspace_.get(); }
    std::size_t workspace_bytes() const { return workspace_.bytes(); }

    /// Waits for everything enqueued on the stream; surfaces asynchronous kernel errors.
    void synchronize() const { SPECDEC_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

private:
    void release() {
        if (blas_ != nullptr) cublasLtDestroy(blas_);
        if (stream_ != nullptr) cudaStreamDestroy(stream_);
        blas_ = nullptr;
        stream_ = nullptr;
    }

    int device_ = 0;
    cudaDeviceProp props_{};
    cudaStream_t stream_ = nullptr;
    cublasLtHandle_t blas_ = nullptr;
    DeviceBuffer<std::byte> workspace_;
};

}  // namespace specdec
