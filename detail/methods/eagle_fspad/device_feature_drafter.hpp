// specdec/detail/methods/eagle_fspad/device_feature_drafter.hpp — EAGLE's and FSPAD's drafter trained on a device (the GPU).
// SPDX-License-Identifier: MIT
#pragma once

// TrainableFeatureDrafter (train_feature.hpp) over a Device: the connector (EAGLE's FC with its optional
// bias, or FSPAD's Feature Sampler) in front of a one-layer DeviceLlama, the same loss L = w·L_t + L_f
// over the same FeatureBatch, the same gradients. The target's embedding and head are frozen (they get
// no gradient: the CPU trainer computes theirs and AdamW skips them; the result is the same).

#include <cstdint>
#include <string>
#include <vector>

#include "../../train/device_llama.hpp"
#include "train_feature.hpp"

namespace specdec::train {

template <class Device>
class DeviceFeatureDrafter {
    template <class T>
    using Buffer = typename Device::template Buffer<T>;

public:
    /// `frozen`: the layer's tensors that are not trained (the target's embedding and head, and under the
    /// EAGLE layout the two norms it skips); they get no gradient.
    DeviceFeatureDrafter(Device& dev, const FeatureCheckpoint& init, std::vector<std::string> frozen)
        : dev_(&dev),
          layer_(dev, init.config, init.weights, std::move(frozen)),
          shape_{init.connector, init.config.hidden_size, init.sampler_size},
          connector_(dev, init.connector_weights, shape_),
          host_connector_(init.connector_weights),
          target_hash_(init.target_hash) {
        layer_.capture_hidden({1});
    }

    DeviceLlama<Device>& layer() { return layer_; }
    DeviceTensors<Device>& connector() { return connector_; }
    const ConnectorShape& connector_shape() const { return shape_; }

    void zero_grad() {
        layer_.zero_grad();
        connector_.zero_grad();
    }

    /// Uploads the batch, runs connector and layer, computes the loss (gradients into dlogits / dhidden)
    /// and, with `backward`, adds every trained parameter's gradient.
    FeatureLoss forward_loss(const FeatureBatch& b, double token_weight, bool backward) {
        detail::require(b.D == shape_.D && b.V == layer_.config().vocab_size, "eagle", [&] {
            return "device drafter: a batch of features " + std::to_string(b.D) + " wide and vocabulary " +
                   std::to_string(b.V) + " for a drafter of " + std::to_string(shape_.D) + " and " +
                   std::to_string(layer_.config().vocab_size);
        });
        upload(b);
        const int N = b.rows(), D = shape_.D, V = b.V;
        connector_forward(N);
        layer_.forward(ModelInput{.B = b.B, .T = b.R, .tokens = b.tokens}, eta_.data());
        int n = 0;
        for (std::uint8_t c : b.counted) n += c != 0;
        FeatureLoss l;
        l.token = device_soft_target_loss(*dev_, layer_.dlogits(), layer_.logits(), probs_.data(), counted_.data(), n, N,
                                          V, token_weight);
        l.feature = device_smooth_l1(*dev_, layer_.dhidden(0), layer_.hidden(0), target_f_.data(), counted_.data(), n, N, D);
        l.total = token_weight * l.token + l.feature;
        if (backward) {
            layer_.backward();
            connector_backward(N);
        }
        return l;
    }

    /// After forward_loss: how often the drafter's argmax is the target's over counted rows.
    double top1_agreement(const FeatureBatch& b) {
        return device_top1_agreement(*dev_, layer_.logits(), probs_.data(), b.counted, b.V);
    }

    /// Clips layer and connector gradients together to global norm max_norm; returns the norm before.
    double clip_gradients(double max_norm) { return device_clip_gradients(*dev_, {&layer_.tensors(), &connector_}, max_norm); }

    /// The connector's gradients, downloaded (for the tests).
    ConnectorWeights connector_grads() const {
        ConnectorWeights g = host_connector_;
        connector_.download(g, shape_, true);
        return g;
    }

    /// The drafter as it stands, downloaded for saving.
    FeatureCheckpoint checkpoint() const {
        ConnectorWeights c = host_connector_;
        connector_.download(c, shape_);
        return FeatureCheckpoint{layer_.config(), layer_.params(), shape_.kind, shape_.I, std::move(c), target_hash_};
    }

private:
    void upload(const FeatureBatch& b) {
        const std::size_t N = static_cast<std::size_t>(b.rows()), D = b.D, V = b.V;
        if (e_.size() != N * D) {
            e_ = dev_->template alloc<float>(N * D), f_ = dev_->template alloc<float>(N * D);
            target_f_ = dev_->template alloc<float>(N * D), eta_ = dev_->template alloc<float>(N * D);
            probs_ = dev_->template alloc<float>(N * V), counted_ = dev_->template alloc<std::uint8_t>(N);
            if (shape_.kind == Connector::kFc) {
                cat_ = dev_->template alloc<float>(N * 2 * D);
            } else {
                const std::size_t I = static_cast<std::size_t>(shape_.I);
                g_ = dev_->template alloc<float>(N * I), u_ = dev_->template alloc<float>(N * I);
                h_ = dev_->template alloc<float>(N * I), dh_ = dev_->template alloc<float>(N * I);
                dg_ = dev_->template alloc<float>(N * I), du_ = dev_->template alloc<float>(N * I);
            }
        }
        dev_->upload(e_.data(), b.e.data(), N * D);
        dev_->upload(f_.data(), b.f.data(), N * D);
        dev_->upload(target_f_.data(), b.target_f.data(), N * D);
        dev_->upload(probs_.data(), b.probs.data(), N * V);
        dev_->upload(counted_.data(), b.counted.data(), N);
    }

    void connector_forward(int N) {
        const int D = shape_.D, I = shape_.I;
        if (shape_.kind == Connector::kFc) {
            dev_->run(ops::Index(N) * 2 * D, ops::Concat2{cat_.data(), e_.data(), f_.data(), D});
            dev_->gemm(eta_.data(), cat_.data(), connector_.value("fc.weight"), N, D, 2 * D, false, true, false);
            if (connector_.has("fc.bias")) dev_->run(ops::Index(N) * D, ops::AddBias{eta_.data(), connector_.value("fc.bias"), D});
            return;
        }
        dev_->gemm(g_.data(), e_.data(), connector_.value("sampler.gate_proj.weight"), N, I, D, false, true, false);
        dev_->gemm(u_.data(), f_.data(), connector_.value("sampler.up_proj.weight"), N, I, D, false, true, false);
        dev_->run(ops::Index(N) * I, ops::SwigluForward{h_.data(), g_.data(), u_.data()});
        dev_->gemm(eta_.data(), h_.data(), connector_.value("sampler.down_proj.weight"), N, D, I, false, true, false);
    }

    void connector_backward(int N) {
        const int D = shape_.D, I = shape_.I;
        const float* deta = layer_.input_embeddings_grad();
        if (shape_.kind == Connector::kFc) {
            dev_->gemm(connector_.grad("fc.weight"), deta, cat_.data(), D, 2 * D, N, true, false, true);
            if (connector_.has("fc.bias")) dev_->run(D, ops::ColumnSum{connector_.grad("fc.bias"), deta, N, D});
            return;
        }
        dev_->fill(dh_.data(), dh_.size(), 0.0f);
        dev_->gemm(dh_.data(), deta, connector_.value("sampler.down_proj.weight"), N, I, D, false, false, true);
        dev_->gemm(connector_.grad("sampler.down_proj.weight"), deta, h_.data(), D, I, N, true, false, true);
        dev_->fill(dg_.data(), dg_.size(), 0.0f);
        dev_->fill(du_.data(), du_.size(), 0.0f);
        dev_->run(ops::Index(N) * I, ops::SwigluBackward{dg_.data(), du_.data(), dh_.data(), g_.data(), u_.data()});
        dev_->gemm(connector_.grad("sampler.gate_proj.weight"), dg_.data(), e_.data(), I, D, N, true, false, true);
        dev_->gemm(connector_.grad("sampler.up_proj.weight"), du_.data(), f_.data(), I, D, N, true, false, true);
    }

    Device* dev_;
    DeviceLlama<Device> layer_;
    ConnectorShape shape_;
    DeviceTensors<Device> connector_;
    ConnectorWeights host_connector_;  // shapes for downloads
    std::string target_hash_;
    Buffer<float> e_, f_, target_f_, probs_, eta_, cat_, g_, u_, h_, dh_, dg_, du_;
    Buffer<std::uint8_t> counted_;
};

}  // namespace specdec::train
