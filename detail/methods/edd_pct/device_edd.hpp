// specdec/detail/methods/edd_pct/device_edd.hpp — EDD's drafter trained on a device (the GPU): train_edd.hpp's loss over a DeviceLlama.
// SPDX-License-Identifier: MIT
#pragma once

// edd-pct.txt §3.1-3.2: one decoder layer reading the target's layer L-3 states as a soft prompt under the
// dual-block mask, trained with forward KL to the target (Eq. 4) or, for the ablation, next-token
// cross-entropy. The batch is train_edd.hpp's EddBatch; the drafter is a DeviceLlama, so with CudaDevice
// this is the GPU trainer and with HostDevice the same code on the CPU (tested against edd_forward_loss).

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "../../train/device_llama.hpp"
#include "train_edd.hpp"

namespace specdec::train {

template <class Device>
class DeviceEdd {
    template <class T>
    using Buffer = typename Device::template Buffer<T>;

public:
    /// `frozen`: tensors that get no gradient (EDD's freeze_embeddings: the embedding and final norm).
    DeviceEdd(Device& dev, const Config& config, const Weights& initial, std::vector<std::string> frozen = {})
        : dev_(&dev), model_(dev, config, initial, std::move(frozen)) {}

    DeviceLlama<Device>& model() { return model_; }
    const DeviceLlama<Device>& model() const { return model_; }

    /// edd_forward_loss on the device: the drafter over the batch, the loss's gradient (scaled by
    /// `weight`) into dlogits; the mean over token rows.
    double forward_loss(const EddBatch& b, bool kl, double weight = 1.0) {
        upload(b);
        model_.forward(b.input());
        const int N = b.B * b.rows_per_window, V = model_.config().vocab_size;
        if (kl)
            return device_soft_target_loss(*dev_, model_.dlogits(), model_.logits(), probs_.data(), counted_.data(), n_counted_,
                                           N, V, weight, /*with_entropy=*/true);
        return device_cross_entropy(*dev_, model_.dlogits(), model_.logits(), targets_.data(), n_counted_, N, V, weight);
    }

    /// After forward_loss: how often the drafter's argmax is the target's over token rows.
    double top1_agreement(const EddBatch& b) {
        return device_top1_agreement(*dev_, model_.logits(), probs_.data(), b.counted, model_.config().vocab_size);
    }

private:
    void upload(const EddBatch& b) {
        const std::size_t N = b.counted.size(), V = static_cast<std::size_t>(model_.config().vocab_size);
        detail::require(b.probs.size() == N * V && b.targets.size() == N, "edd", [&] {
            return "device EDD: a batch of " + std::to_string(b.probs.size()) + " law entries and " +
                   std::to_string(b.targets.size()) + " targets for " + std::to_string(N) + " rows of vocabulary " +
                   std::to_string(V);
        });
        if (counted_.size() != N) {
            probs_ = dev_->template alloc<float>(N * V);
            counted_ = dev_->template alloc<std::uint8_t>(N);
            targets_ = dev_->template alloc<int>(N);
        }
        dev_->upload(probs_.data(), b.probs.data(), N * V);
        dev_->upload(counted_.data(), b.counted.data(), N);
        dev_->upload(targets_.data(), b.targets.data(), N);
        n_counted_ = static_cast<int>(std::count(b.counted.begin(), b.counted.end(), std::uint8_t{1}));
    }

    Device* dev_;
    DeviceLlama<Device> model_;
    Buffer<float> probs_;
    Buffer<std::uint8_t> counted_;
    Buffer<int> targets_;
    int n_counted_ = 0;
};

}  // namespace specdec::train
